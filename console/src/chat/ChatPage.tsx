// Chat: pick an Agent, pick or start one of its Sessions, talk to it.
import { useEffect } from "react";
import { useClient } from "../auth";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { href, navigate } from "../router";
import { SessionList } from "./SessionList";
import { Conversation } from "./Conversation";

export function ChatPage({ route }: { route: string[] }) {
  const client = useClient();
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
        Create one under <a href={href("admin", "agents")}>Admin → Agents</a> (it needs a runtime profile with a model endpoint).
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
          <Empty title="Pick a session">Choose one on the left, or start a new one.</Empty>
        )}
      </div>
    </div>
  );
}
