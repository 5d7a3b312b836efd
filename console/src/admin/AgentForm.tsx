// The form that creates an Agent or updates one (at its version).
import { useState, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { Agent, AgentRequest, RuntimeProfile, Vault } from "../api/types";
import { toggleId } from "./vaults";
import { FormFooter } from "../ui/FormFooter";

interface Props {
  agent: Agent | null;
  profiles: RuntimeProfile[];
  /** undefined while they load. */
  vaults: Vault[] | undefined;
  onDone: () => void;
  onCancel: () => void;
}

export function AgentForm({ agent, profiles, vaults: loaded, onDone, onCancel }: Props) {
  const client = useClient();
  const [f, setF] = useState<AgentRequest>({
    name: agent?.name ?? "",
    engine_kind: agent?.engine_kind ?? "astrabox",
    runtime_profile: agent?.runtime_profile ?? profiles[0]?.name ?? "",
    model: agent?.model ?? "",
    instructions: agent?.instructions ?? "",
    permission_mode: agent?.permission_mode ?? "auto",
    vault_ids: agent?.vault_ids ?? [],
  });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const set = <K extends keyof AgentRequest>(k: K, v: AgentRequest[K]) => setF({ ...f, [k]: v });
  const vaultIds = f.vault_ids ?? [];
  // A vault the Agent names but the list lacks (deleted meanwhile) stays listed, to be unticked.
  const vaults = loaded ?? [];
  const missing = loaded ? vaultIds.filter((id) => !loaded.some((v) => v.vault_id === id)) : [];
  const models = profiles.find((p) => p.name === f.runtime_profile)?.model?.models ?? [];

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      if (agent) await client.updateAgent(agent.agent_id, { ...f, tools: agent.tools, version: agent.version });
      else await client.createAgent(f);
      onDone();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card form-grid" onSubmit={submit} aria-label={agent ? `Edit ${agent.name}` : "New agent"}>
      <label>
        Name
        <input value={f.name} onChange={(e) => set("name", e.target.value)} required />
      </label>
      <label>
        Runtime profile
        <select value={f.runtime_profile} onChange={(e) => set("runtime_profile", e.target.value)} required>
          {profiles.length === 0 && <option value="">(create a profile first)</option>}
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
      <label className="span-all">
        Instructions
        <textarea rows={3} value={f.instructions} onChange={(e) => set("instructions", e.target.value)} />
      </label>
      <FormFooter error={error} busy={busy} onCancel={onCancel} />
    </form>
  );
}
