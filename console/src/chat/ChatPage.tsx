// Chat: pick an Agent, pick or start one of its Sessions, talk to it.
import { useEffect } from "react";
import { useCan, useClient } from "../auth";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { href, navigate } from "../router";
import { SessionList } from "./SessionList";
import { Conversation } from "./Conversation";

export function ChatPage({ route }: { route: string[] }) {
  const client = useClient();
  const write = useCan("write");
  const agents = useAsync(() => client.agents(), [client]);
  const [agentId, sessionId] = route;
  const items = agents.data?.items ?? [];
  const first = items[0]?.agent_id;
  useEffect(() => {
    if (!agentId && first) navigate("chat", first);
  }, [agentId, first]);

  if (agents.error) return <ErrorBanner error={agents.error} onRetry={agents.reload} />;
  if (!agents.data) return <Loading label="Loading agents…" />;
  if (items.length === 0) {
    return (
      <Empty title="No agents yet">
        {write ? (
          <>
            Create one under <a href={href("agents")}>Agents</a> (it needs a runtime profile with a model endpoint), or ask someone
            to share theirs with you.
          </>
        ) : (
          "None is shared with you yet."
        )}
      </Empty>
    );
  }
  return (
    <div className="chat-layout">
      <aside className="sidebar" aria-label="Agents and sessions">
        <label htmlFor="agent-select">Agent</label>
        <select id="agent-select" value={agentId ?? ""} onChange={(e) => navigate("chat", e.target.value)}>
          {items.map((a) => (
            <option key={a.agent_id} value={a.agent_id}>
              {a.name} ({a.permission_mode})
            </option>
          ))}
        </select>
        {agentId && <SessionList key={agentId} agentId={agentId} sessionId={sessionId} />}
      </aside>
      <div className="chat-main">
        {sessionId ? (
          <Conversation key={sessionId} sessionId={sessionId} />
        ) : (
          <Empty title="Pick a session">{write ? "Choose one on the left, or start a new one." : "Choose one on the left."}</Empty>
        )}
      </div>
    </div>
  );
}
