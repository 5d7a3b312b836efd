// RuntimeProfiles: the list with a model endpoint check per profile, and
// a form to create or replace one.
import { useState } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { ModelCheck, RuntimeProfile } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { ProfileForm } from "./ProfileForm";

export function ProfilesAdmin() {
  const client = useClient();
  const list = useAsync(() => client.profiles(), [client]);
  const [editing, setEditing] = useState<RuntimeProfile | "new" | null>(null);
  const remove = async (name: string) => {
    if (!window.confirm(`Delete runtime profile ${name}?`)) return;
    try {
      await client.deleteProfile(name);
    } catch (err) {
      window.alert(errorText(err));
    }
    await list.reload();
  };
  return (
    <div>
      <div className="page-head">
        <h2>Runtime profiles</h2>
        <button className="primary" onClick={() => setEditing("new")}>
          New profile
        </button>
      </div>
      {editing && (
        <ProfileForm
          profile={editing === "new" ? null : editing}
          onDone={() => {
            setEditing(null);
            void list.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading />}
      {list.data && list.data.items.length === 0 && <Empty title="No runtime profiles" />}
      <ul className="cards">
        {list.data?.items.map((p) => (
          <li key={p.name} className="card" data-testid="profile-card">
            <div className="card-head">
              <h3>{p.name}</h3>
              {p.version ? <span className="muted small">v{p.version}</span> : null}
            </div>
            <dl className="facts">
              <dt>Backend</dt>
              <dd>{p.backend || "default"}</dd>
              <dt>Image</dt>
              <dd>{p.image || "default"}</dd>
              <dt>Model endpoint</dt>
              <dd className="truncate">{p.model?.base_url ?? "—"}</dd>
              <dt>Models</dt>
              <dd>{p.model?.models?.join(", ") || "any"}</dd>
              <dt>Key</dt>
              <dd>{p.api_key_set ? "set (sealed)" : "none"}</dd>
              <dt>Pool</dt>
              <dd>{p.poolSize ?? 0}</dd>
            </dl>
            {p.model?.base_url && <ModelTest name={p.name} />}
            <div className="actions">
              <button onClick={() => setEditing(p)}>Edit</button>
              <button className="danger" onClick={() => void remove(p.name)}>
                Delete
              </button>
            </div>
          </li>
        ))}
      </ul>
    </div>
  );
}

/** The "Test model endpoint" button and its outcome. */
function ModelTest({ name }: { name: string }) {
  const client = useClient();
  const [busy, setBusy] = useState(false);
  const [result, setResult] = useState<ModelCheck | { error: string } | null>(null);
  const run = async () => {
    setBusy(true);
    setResult(null);
    try {
      setResult(await client.testModel(name));
    } catch (err) {
      setResult({ error: errorText(err) });
    } finally {
      setBusy(false);
    }
  };
  return (
    <div className="model-test">
      <button onClick={() => void run()} disabled={busy}>
        {busy ? "Testing…" : "Test model endpoint"}
      </button>
      {result && (
        <span role="status" className={"error" in result || !result.ok ? "error small" : "ok small"} data-testid="model-check">
          {"error" in result
            ? result.error
            : result.ok
              ? `OK: ${result.model} answered in ${result.latency_ms} ms`
              : `Failed: ${result.message ?? `HTTP ${result.status}`}`}
        </span>
      )}
    </div>
  );
}
