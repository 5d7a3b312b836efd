// One sandbox: its record kept live by its event stream, its actions, and
// a terminal and a file browser while it runs.
import { useEffect, useMemo, useState } from "react";
import { useCan, useClient } from "../auth";
import type { StateEvent } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { ErrorBanner, Loading } from "../ui/states";
import { relativeTime } from "../ui/format";
import { href, navigate } from "../router";
import { EventFollowers } from "./events";
import { merge } from "./useSandboxes";
import { SandboxActions } from "./SandboxActions";
import { Terminal } from "./Terminal";
import { FileBrowser } from "./FileBrowser";

const tabs = [
  { id: "terminal", label: "Terminal" },
  { id: "files", label: "Files" },
] as const;

export function SandboxDetail({ id, tab }: { id: string; tab: string | undefined }) {
  const client = useClient();
  const write = useCan("write");
  const rec = useAsync(() => client.getSandbox(id), [client, id]);
  const [event, setEvent] = useState<StateEvent | null>(null);
  const followers = useMemo(() => new EventFollowers(client, setEvent, 1), [client]);
  useEffect(() => {
    followers.sync([id]);
    return () => followers.close();
  }, [followers, id]);

  if (rec.error) return <ErrorBanner error={rec.error} onRetry={rec.reload} />;
  if (!rec.data) return <Loading label="Loading the sandbox…" />;
  const [sb] = merge([rec.data], event ? { [id]: event } : {});
  const current = tabs.some((t) => t.id === tab) ? tab : "terminal";
  const running = sb.status.state === "Running";
  return (
    <div className="page">
      <p>
        <a href={href("sandboxes")}>← Sandboxes</a>
      </p>
      <div className="page-head">
        <h1>
          <code>{sb.id}</code>
        </h1>
        <span className={`badge state-${sb.status.state}`} data-testid="sandbox-state">
          {sb.status.state}
        </span>
      </div>
      <dl className="facts">
        <dt>Backend</dt>
        <dd>{sb.backend ?? "—"}</dd>
        <dt>Image</dt>
        <dd>{sb.image?.uri || "default"}</dd>
        <dt>Profile</dt>
        <dd>{sb.profile || "—"}</dd>
        <dt>Expires</dt>
        <dd title={sb.expiresAt}>{sb.expiresAt ? relativeTime(sb.expiresAt) : "never"}</dd>
        {sb.status.reason && (
          <>
            <dt>Reason</dt>
            <dd>{sb.status.reason}</dd>
          </>
        )}
      </dl>
      {write && <SandboxActions sandbox={sb} onDone={(a) => (a === "delete" ? navigate("sandboxes") : void rec.reload())} />}
      <div role="tablist" aria-label="Sandbox tools" className="tabs">
        {tabs.map((t) => (
          <a key={t.id} role="tab" aria-selected={current === t.id} href={href("sandboxes", id, t.id)}>
            {t.label}
          </a>
        ))}
      </div>
      <div role="tabpanel" className="tabpanel">
        {!write && <p className="muted">The terminal and files need the write permission, which your role lacks.</p>}
        {write && !running && <p className="muted">The terminal and files are available while the sandbox is Running.</p>}
        {write && running && current === "terminal" && <Terminal sandboxId={id} />}
        {write && running && current === "files" && <FileBrowser sandboxId={id} />}
      </div>
    </div>
  );
}
