// The form that creates an Agent or updates one (at its version), with its
// sharing: who besides its owner sees it (private, shared with named
// users, public) and who manages it with them (its admins). Only
// administrators attach vaults.
import { useState, type FormEvent } from "react";
import { useClient, useMe } from "../auth";
import { errorText } from "../api/client";
import type { Agent, AgentRequest, RuntimeProfile, Vault } from "../api/types";
import type { User, Visibility } from "../api/identity";
import { can } from "../permissions";
import { toggleId } from "./vaults";
import { accessChanged, accessOf, accessRequest, addIds, visibilities, whoIs } from "./sharing";
import { UserIds } from "./UserIds";
import { FormFooter } from "../ui/FormFooter";

interface Props {
  agent: Agent | null;
  profiles: RuntimeProfile[];
  /** undefined while they load; null: the caller may not read them (not an administrator). */
  vaults: Vault[] | null | undefined;
  /** Users to offer for sharing (administrators'; empty otherwise). */
  users: readonly User[];
  onDone: () => void;
  onCancel: () => void;
}

export function AgentForm({ agent, profiles, vaults: loaded, users, onDone, onCancel }: Props) {
  const client = useClient();
  const me = useMe();
  const admin = can(me, "admin");
  const [f, setF] = useState<AgentRequest>({
    name: agent?.name ?? "",
    engine_kind: agent?.engine_kind ?? "astrabox",
    runtime_profile: agent?.runtime_profile ?? profiles[0]?.name ?? "",
    model: agent?.model ?? "",
    instructions: agent?.instructions ?? "",
    permission_mode: agent?.permission_mode ?? "auto",
    vault_ids: agent?.vault_ids ?? [],
  });
  const initial = accessOf(agent);
  const [visibility, setVisibility] = useState<Visibility>(initial.visibility);
  const [allowed, setAllowed] = useState(initial.allowed_user_ids);
  const [admins, setAdmins] = useState(initial.admins);
  const [drafts, setDrafts] = useState({ allowed: "", admins: "" });
  // The Agent as saved so far: a create whose sharing failed is not made twice.
  const [saved, setSaved] = useState<Agent | null>(agent);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const set = <K extends keyof AgentRequest>(k: K, v: AgentRequest[K]) => setF({ ...f, [k]: v });
  const vaultIds = f.vault_ids ?? [];
  // A vault the Agent names but the list lacks (deleted meanwhile) stays listed, to be unticked.
  const vaults = loaded ?? [];
  const missing = loaded ? vaultIds.filter((id) => !loaded.some((v) => v.vault_id === id)) : [];
  const models = profiles.find((p) => p.name === f.runtime_profile)?.model?.models ?? [];
  const profileKnown = profiles.some((p) => p.name === f.runtime_profile);

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    // What is typed in a user field and not added yet counts too.
    const allowedIds = addIds(allowed, drafts.allowed);
    const adminIds = addIds(admins, drafts.admins);
    setAllowed(allowedIds);
    setAdmins(adminIds);
    setDrafts({ allowed: "", admins: "" });
    try {
      const a = saved
        ? await client.updateAgent(saved.agent_id, { ...f, tools: saved.tools, version: saved.version })
        : await client.createAgent(f);
      setSaved(a);
      const access = accessRequest(visibility, allowedIds, adminIds);
      if (accessChanged(access, accessOf(a))) await client.putAgentAccess(a.agent_id, access);
      onDone();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const owner = agent?.owner_id ? whoIs(agent.owner_id, me.user.user_id, users) : "you";
  return (
    <form className="card form-grid" onSubmit={submit} aria-label={agent ? `Edit ${agent.name}` : "New agent"}>
      <label>
        Name
        <input value={f.name} onChange={(e) => set("name", e.target.value)} required />
      </label>
      <label>
        Runtime profile
        <select value={f.runtime_profile} onChange={(e) => set("runtime_profile", e.target.value)} required>
          {profiles.length === 0 && <option value="">({admin ? "create a profile first" : "no profiles: ask an administrator"})</option>}
          {!profileKnown && f.runtime_profile && <option value={f.runtime_profile}>{f.runtime_profile}</option>}
          {profiles.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
            </option>
          ))}
        </select>
      </label>
      <label>
        Model
        <input value={f.model} onChange={(e) => set("model", e.target.value)} list="agent-models" placeholder={models[0] ?? "the endpoint's model name"} />
        <datalist id="agent-models">
          {models.map((m) => (
            <option key={m} value={m} />
          ))}
        </datalist>
      </label>
      <label>
        Permissions
        <select value={f.permission_mode} onChange={(e) => set("permission_mode", e.target.value)}>
          <option value="auto">auto: tools run at once</option>
          <option value="ask">ask: approve each tool call</option>
        </select>
      </label>
      {loaded !== null ? (
        <fieldset className="span-all vault-picks">
          <legend>Vaults</legend>
          {!loaded && <span className="muted small">Loading…</span>}
          {loaded && vaults.length === 0 && missing.length === 0 && <span className="muted small">No vaults yet (Admin → Vaults).</span>}
          {vaults.map((v) => (
            <label key={v.vault_id} className="check">
              <input
                type="checkbox"
                checked={vaultIds.includes(v.vault_id)}
                onChange={(e) => set("vault_ids", toggleId(vaultIds, v.vault_id, e.target.checked, vaults))}
              />
              {v.name}
              <span className="muted small">{(v.secrets ?? []).map((s) => s.name).join(", ") || "no secrets"}</span>
            </label>
          ))}
          {missing.map((id) => (
            <label key={id} className="check">
              <input type="checkbox" checked onChange={() => set("vault_ids", toggleId(vaultIds, id, false, vaults))} />
              <code>{id}</code>
              <span className="error small">not found</span>
            </label>
          ))}
        </fieldset>
      ) : (
        vaultIds.length > 0 && (
          <p className="span-all muted small">
            {vaultIds.length === 1 ? "A credential vault is" : `${vaultIds.length} credential vaults are`} attached; administrators change
            them.
          </p>
        )
      )}
      <label className="span-all">
        Instructions
        <textarea rows={3} value={f.instructions} onChange={(e) => set("instructions", e.target.value)} />
      </label>
      <fieldset className="span-all sharing">
        <legend>Sharing</legend>
        <p className="muted small">
          Owner: {owner}. Whoever sees an agent may chat with it (each conversation stays its opener's).
        </p>
        <div className="radios" role="radiogroup" aria-label="Visibility">
          {visibilities.map((v) => (
            <label key={v.id} className="check">
              <input type="radio" name="visibility" value={v.id} checked={visibility === v.id} onChange={() => setVisibility(v.id)} />
              {v.label}
              <span className="muted small">{v.help}</span>
            </label>
          ))}
        </div>
        <div className="sharing-lists">
          {visibility === "shared" && (
            <UserIds
              label="Shared with"
              ids={allowed}
              onChange={setAllowed}
              draft={drafts.allowed}
              onDraft={(t) => setDrafts((d) => ({ ...d, allowed: t }))}
              me={me.user.user_id}
              users={users}
              help="They may see the agent and chat with it."
            />
          )}
          <UserIds
            label="Agent admins"
            ids={admins}
            onChange={setAdmins}
            draft={drafts.admins}
            onDraft={(t) => setDrafts((d) => ({ ...d, admins: t }))}
            me={me.user.user_id}
            users={users}
            help="They may change and delete it, and its sharing, as its owner may."
          />
        </div>
        {users.length === 0 && (
          <p className="muted small">A person finds their user id in their account menu (top right).</p>
        )}
      </fieldset>
      <FormFooter error={error} busy={busy} onCancel={onCancel} />
    </form>
  );
}
