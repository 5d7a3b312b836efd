// Agents: those the caller may see (the server decides: an administrator
// every one, another user its own, those shared with it and the public
// ones), with their sharing, and a form to create or edit one. Edit and
// Delete only where the caller manages the Agent.
import { useState } from "react";
import { useClient, useMe } from "../auth";
import { errorText } from "../api/client";
import type { Agent } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { href } from "../router";
import { can, canManageAgent } from "../permissions";
import { AgentForm } from "./AgentForm";
import { vaultNames } from "./vaults";
import { accessOf, whoIs } from "./sharing";
import { allUsers } from "./UsersAdmin";

export function AgentsPage() {
  const client = useClient();
  const me = useMe();
  const admin = can(me, "admin");
  const write = can(me, "write");
  const list = useAsync(() => client.agents(), [client]);
  const profiles = useAsync(() => client.profiles(), [client]);
  // Vaults and the user list are administrators' to read.
  const vaults = useAsync(() => (admin ? client.vaults().then((p) => p.items) : Promise.resolve(null)), [client, admin]);
  const users = useAsync(() => (admin ? allUsers(client) : Promise.resolve([])), [client, admin]);
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
  const known = users.data ?? [];
  const myId = me.user.user_id;
  return (
    <div className="page">
      <div className="page-head">
        <h1>Agents</h1>
        {write && (
          <button className="primary" onClick={() => setEditing("new")}>
            New agent
          </button>
        )}
      </div>
      {editing && (
        <AgentForm
          key={editing === "new" ? "new" : editing.agent_id}
          agent={editing === "new" ? null : editing}
          profiles={profiles.data?.items ?? []}
          vaults={admin ? vaults.data : null}
          users={known}
          onDone={() => {
            setEditing(null);
            void list.reload();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading />}
      {list.data && list.data.items.length === 0 && (
        <Empty title="No agents">
          {write ? "Create one: it needs a runtime profile with a model endpoint." : "None is shared with you yet."}
        </Empty>
      )}
      {list.data && list.data.items.length > 0 && (
        <div className="table-wrap">
          <table className="table" aria-label="Agents">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Sharing</th>
                <th scope="col">Owner</th>
                <th scope="col">Model</th>
                <th scope="col">Profile</th>
                <th scope="col">Permissions</th>
                {admin && <th scope="col">Vaults</th>}
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {list.data.items.map((a) => {
                const access = accessOf(a);
                const manage = canManageAgent(me, a);
                const shared = access.allowed_user_ids.length;
                return (
                  <tr key={a.agent_id} data-testid="agent-row">
                    <td>
                      <a href={href("chat", a.agent_id)}>{a.name}</a>
                    </td>
                    <td>
                      <span className={`badge visibility-${access.visibility}`} title={sharingTitle(a, myId, known)}>
                        {access.visibility}
                        {access.visibility === "shared" ? ` · ${shared}` : ""}
                      </span>
                    </td>
                    <td>{a.owner_id ? whoIs(a.owner_id, myId, known) : "—"}</td>
                    <td>{a.model || "—"}</td>
                    <td>{a.runtime_profile}</td>
                    <td>{a.permission_mode}</td>
                    {admin && <td>{vaultNames(a.vault_ids, vaults.data ?? []).join(", ") || "—"}</td>}
                    <td className="actions">
                      {manage && (
                        <>
                          <button onClick={() => setEditing(a)}>Edit</button>
                          <button className="danger" onClick={() => void remove(a)}>
                            Delete
                          </button>
                        </>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

/** "Shared with: bob, carol. Admins: dave." */
function sharingTitle(a: Agent, me: string, users: Parameters<typeof whoIs>[2]): string {
  const { visibility, allowed_user_ids, admins } = accessOf(a);
  const parts: string[] = [];
  if (visibility === "shared") parts.push(`Shared with: ${allowed_user_ids.map((id) => whoIs(id, me, users)).join(", ") || "nobody yet"}.`);
  if (visibility === "public") parts.push("Everyone in the organization sees it.");
  if (admins.length > 0) parts.push(`Admins: ${admins.map((id) => whoIs(id, me, users)).join(", ")}.`);
  return parts.join(" ") || "Only its owner, its admins and administrators see it.";
}
