// The Sessions of one Agent, newest first, and a button to start one.
import { useEffect, useState } from "react";
import { useCan, useClient } from "../auth";
import { errorText } from "../api/client";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { relativeTime } from "../ui/format";
import { href, navigate } from "../router";
import type { Session } from "../api/types";
import { sessionEvent } from "./useSession";

/** How often the list is read again (states, new Sessions). */
const refreshEvery = 5000;

/**
 * The instant of a wire time (RFC 3339, its fraction of variable length,
 * so not comparable as text); -Infinity for none.
 */
function instant(t: string | undefined): number {
  return t ? Date.parse(t) : Number.NEGATIVE_INFINITY;
}

interface Props {
  agentId: string;
  sessionId: string | undefined;
}

export function SessionList({ agentId, sessionId }: Props) {
  const client = useClient();
  const write = useCan("write");
  const list = useAsync(() => client.sessions(agentId), [client, agentId]);
  const { reload } = list;
  useEffect(() => {
    const t = setInterval(() => void reload(), refreshEvery);
    return () => clearInterval(t);
  }, [reload]);
  const [fresh, setFresh] = useState<Record<string, Session>>({});
  useEffect(() => {
    const on = (e: Event) => {
      const s = (e as CustomEvent<Session>).detail;
      setFresh((m) => ({ ...m, [s.session_id]: s }));
    };
    window.addEventListener(sessionEvent, on);
    return () => window.removeEventListener(sessionEvent, on);
  }, []);
  const [creating, setCreating] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const start = async () => {
    setCreating(true);
    setError(null);
    try {
      const s = await client.createSession(agentId); // titled by its first message
      await list.reload();
      navigate("chat", agentId, s.session_id);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setCreating(false);
    }
  };
  const sessions = (list.data?.items ?? [])
    .map((s) => (instant(fresh[s.session_id]?.updated_at) >= instant(s.updated_at) ? fresh[s.session_id] : s))
    .filter((s) => s.state !== "DELETED")
    .sort((a, b) => instant(b.updated_at) - instant(a.updated_at));
  return (
    <div className="session-list">
      {write && (
        <button className="primary wide" onClick={() => void start()} disabled={creating}>
          {creating ? "Starting…" : "New session"}
        </button>
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {list.loading && !list.data && <Loading />}
      {list.data && sessions.length === 0 && <Empty title="No sessions yet">{write ? undefined : "Your role reads only."}</Empty>}
      <nav aria-label="Sessions">
        <ul>
          {sessions.map((s) => (
            <li key={s.session_id}>
              <a href={href("chat", agentId, s.session_id)} aria-current={s.session_id === sessionId ? "page" : undefined}>
                <span className="session-title">{s.title || "New session"}</span>
                <span className="muted small">
                  {s.state.toLowerCase()} · {relativeTime(s.updated_at)}
                </span>
              </a>
            </li>
          ))}
        </ul>
      </nav>
    </div>
  );
}
