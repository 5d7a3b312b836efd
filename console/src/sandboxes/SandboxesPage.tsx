// Sandboxes: the live list with its actions and the create form, or one
// sandbox's page.
import { useCan, useClient } from "../auth";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { relativeTime, shortId } from "../ui/format";
import { href, navigate } from "../router";
import { useSandboxes } from "./useSandboxes";
import { SandboxActions } from "./SandboxActions";
import { CreateSandbox } from "./CreateSandbox";
import { SandboxDetail } from "./SandboxDetail";
import type { Sandbox } from "../api/types";

export function SandboxesPage({ route }: { route: string[] }) {
  const [id, tab] = route;
  if (id) return <SandboxDetail id={id} tab={tab} />;
  return <SandboxList />;
}

function SandboxList() {
  const client = useClient();
  const write = useCan("write");
  const list = useSandboxes(client);
  const profiles = useAsync(() => client.profiles(), [client]);
  // A Session's box is the platform's, for its agent: listed apart.
  const own = list.items.filter((s) => !s.metadata?.[sessionKey]);
  const ofSessions = list.items.filter((s) => s.metadata?.[sessionKey]);
  return (
    <div className="page">
      <div className="page-head">
        <h1>Sandboxes</h1>
        {list.loading && list.data && <span className="spinner" role="status" aria-label="Refreshing" />}
      </div>
      {write && <CreateSandbox profiles={profiles.data?.items ?? []} onCreated={(sid) => navigate("sandboxes", sid)} />}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading label="Loading sandboxes…" />}
      {list.data && list.items.length === 0 && (
        <Empty title="No sandboxes">{write ? "Create one with the form on this page, or start a chat: each Session gets its own." : "You have none."}</Empty>
      )}
      {own.length > 0 && (
        <>
          {ofSessions.length > 0 && <h2 className="section-title">Your sandboxes</h2>}
          <SandboxTable label="Your sandboxes" items={own} write={write} onDone={() => void list.reload()} />
        </>
      )}
      {ofSessions.length > 0 && (
        <>
          <h2 className="section-title">Sandboxes of chat Sessions</h2>
          <p className="muted small">
            Each Session runs its agent in one of these. Deleting one stops what its agent was doing; the Session&apos;s
            next message starts a fresh one, with the conversation kept.
          </p>
          <SandboxTable label="Sandboxes of chat Sessions" items={ofSessions} write={write} onDone={() => void list.reload()} />
        </>
      )}
    </div>
  );
}

/** The metadata keys naming the Session a sandbox serves, and its Agent. */
const sessionKey = "astrabox.session";
const agentKey = "astrabox.agent";

function SandboxTable({ label, items, write, onDone }: { label: string; items: Sandbox[]; write: boolean; onDone: () => void }) {
  return (
    <div className="table-wrap">
      <table className="table stack" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Sandbox</th>
            <th scope="col">State</th>
            <th scope="col">Backend</th>
            <th scope="col">Image</th>
            <th scope="col">Expires</th>
            <th scope="col">
              <span className="visually-hidden">Actions</span>
            </th>
          </tr>
        </thead>
        <tbody>
          {items.map((s) => (
            <tr key={s.id} data-testid="sandbox-row">
              <td>
                <a href={href("sandboxes", s.id)} title={s.id}>
                  <code>{shortId(s.id)}</code>
                </a>
                {s.profile && <span className="muted small"> {s.profile}</span>}
                {s.metadata?.[sessionKey] && (
                  <span className="muted small">
                    {" · "}
                    <a href={href("chat", s.metadata[agentKey] ?? "", s.metadata[sessionKey])}>its Session</a>
                  </span>
                )}
              </td>
              <td>
                <span className={`badge state-${s.status.state}`}>{s.status.state}</span>
              </td>
              <td data-label="Backend">{s.backend ?? "—"}</td>
              <td className="truncate" data-label="Image">
                {s.image?.uri || "default"}
              </td>
              <td title={s.expiresAt} data-label="Expires">
                {s.expiresAt ? relativeTime(s.expiresAt) : "never"}
              </td>
              <td>{write && <SandboxActions sandbox={s} onDone={onDone} />}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
