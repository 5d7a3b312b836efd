// The audit log (administrators): newest first, filtered by actor, action
// (a prefix ending in ".") or target, page after page.
import { useState, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { AuditEntry } from "../api/identity";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { relativeTime } from "../ui/format";

type Filter = { actor_id?: string; action?: string; target?: string };

export function AuditAdmin() {
  const client = useClient();
  const [filter, setFilter] = useState<Filter>({});
  const [form, setForm] = useState({ actor_id: "", action: "", target: "" });
  const first = useAsync(() => client.audit(filter), [client, filter]);
  const [older, setOlder] = useState<{ items: AuditEntry[]; next: string | null } | null>(null);
  const [loadingMore, setLoadingMore] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const items = [...(first.data?.items ?? []), ...(older?.items ?? [])];
  const next = older ? older.next : (first.data?.next_cursor ?? null);

  const apply = (e: FormEvent) => {
    e.preventDefault();
    const f: Filter = {};
    for (const [k, v] of Object.entries(form)) if (v.trim()) f[k as keyof Filter] = v.trim();
    setOlder(null);
    setFilter(f);
  };
  const more = async () => {
    if (!next) return;
    setLoadingMore(true);
    setError(null);
    try {
      const page = await client.audit(filter, next);
      setOlder({ items: [...(older?.items ?? []), ...page.items], next: page.next_cursor ?? null });
    } catch (err) {
      setError(errorText(err));
    } finally {
      setLoadingMore(false);
    }
  };
  return (
    <div className="audit">
      <div className="page-head">
        <h2>Audit log</h2>
      </div>
      <form className="card create-form" onSubmit={apply} aria-label="Filter the audit log">
        <label>
          Actor
          <input value={form.actor_id} onChange={(e) => setForm({ ...form, actor_id: e.target.value })} placeholder="user id" />
        </label>
        <label>
          Action
          <input value={form.action} onChange={(e) => setForm({ ...form, action: e.target.value })} placeholder="api_key." />
        </label>
        <label>
          Target
          <input value={form.target} onChange={(e) => setForm({ ...form, target: e.target.value })} placeholder="user:alice" />
        </label>
        <button type="submit">Filter</button>
      </form>
      {first.error !== undefined && <ErrorBanner error={first.error} onRetry={first.reload} />}
      {!first.data && !first.error && <Loading label="Loading the audit log…" />}
      {first.data && items.length === 0 && <Empty title="Nothing recorded" />}
      {items.length > 0 && (
        <div className="table-wrap">
          <table className="table" aria-label="Audit log">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Actor</th>
                <th scope="col">Action</th>
                <th scope="col">Request</th>
                <th scope="col">Target</th>
              </tr>
            </thead>
            <tbody>
              {items.map((e) => (
                <tr key={e.seq} data-testid="audit-row">
                  <td title={e.at}>{relativeTime(e.at)}</td>
                  <td>
                    <code>{e.actor_id}</code>
                  </td>
                  <td>{e.action}</td>
                  <td>
                    <code className="muted small">{e.request_id}</code>
                  </td>
                  <td>
                    <code>{e.target}</code>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {next && (
        <div>
          <button onClick={() => void more()} disabled={loadingMore}>
            {loadingMore ? "Loading…" : "Older entries"}
          </button>
        </div>
      )}
    </div>
  );
}
