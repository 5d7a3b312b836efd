// Agents: the list, and a form to create or edit one.
import { useState } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { Agent } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { href } from "../router";
import { AgentForm } from "./AgentForm";
import { vaultNames } from "./vaults";

export function AgentsAdmin() {
  const client = useClient();
  const list = useAsync(() => client.agents(), [client]);
  const profiles = useAsync(() => client.profiles(), [client]);
  const vaults = useAsync(() => client.vaults(), [client]);
  const [editing, setEditing] = useState<Agent | "new" | null>(null);
  const remove = async (a: Agent) => {
    if (!window.confirm(`Delete agent ${a.name}? Its sessions stay readable.`)) return;
    try {
      await client.deleteAgent(a.agent_id);
    } catch (err) {
      window.alert(errorText(err));
    }
    await list.reload();
  };
  return (
    <div>
      <div className="page-head">
        <h2>Agents</h2>
        <button className="primary" onClick={() => setEditing("new")}>
          New agent
        </button>
      </div>
      {editing && (
        <AgentForm
          agent={editing === "new" ? null : editing}
          profiles={profiles.data?.items ?? []}
          vaults={vaults.data?.items}
          onDone={() => {
            setEditing(null);
            void list.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading />}
      {list.data && list.data.items.length === 0 && <Empty title="No agents">Create one: it needs a runtime profile with a model endpoint.</Empty>}
      {list.data && list.data.items.length > 0 && (
        <div className="table-wrap">
          <table className="table" aria-label="Agents">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Profile</th>
                <th scope="col">Model</th>
                <th scope="col">Permissions</th>
                <th scope="col">Vaults</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.items.map((a) => (
                <tr key={a.agent_id}>
                  <td>
                    <a href={href("chat", a.agent_id)}>{a.name}</a>
                  </td>
                  <td>{a.runtime_profile}</td>
                  <td>{a.model || "—"}</td>
                  <td>{a.permission_mode}</td>
                  <td>{vaultNames(a.vault_ids, vaults.data?.items ?? []).join(", ") || "—"}</td>
                  <td className="actions">
                    <button onClick={() => setEditing(a)}>Edit</button>
                    <button className="danger" onClick={() => void remove(a)}>
                      Delete
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}
