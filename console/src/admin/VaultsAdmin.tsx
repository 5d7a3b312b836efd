// Credential vaults: the list with each vault's secrets (their names and
// destinations, never their values), a form to create a vault, and one to
// add or replace a secret.
import { useRef, useState, type FormEvent } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { Agent, Vault } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { relativeTime } from "../ui/format";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { FormFooter } from "../ui/FormFooter";
import { SECRET_NAME, agentsUsing, blankSecret, delivery, deleteErrorText, destination, secretFields, secretRequest, type SecretFields } from "./vaults";

export function VaultsAdmin() {
  const client = useClient();
  const list = useAsync(() => client.vaults(), [client]);
  const agents = useAsync(() => client.agents(), [client]);
  const [creating, setCreating] = useState(false);
  return (
    <div>
      <div className="page-head">
        <h2>Vaults</h2>
        <button className="primary" onClick={() => setCreating(true)}>
          New vault
        </button>
      </div>
      <p className="muted small">
        Secrets are write-only: a box gets a placeholder in the secret's environment variable, and the egress proxy puts the real value only
        into requests to its destination. Attach a vault to an Agent on the Agents tab.
      </p>
      {creating && (
        <VaultForm
          onDone={() => {
            setCreating(false);
            void list.reload();
          }}
          onCancel={() => setCreating(false)}
        />
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading />}
      {list.data && list.data.items.length === 0 && <Empty title="No vaults">Create one, add its secrets, then attach it to an Agent.</Empty>}
      <ul className="cards">
        {list.data?.items.map((v) => (
          <VaultCard
            key={v.vault_id}
            vault={v}
            agents={agents.data?.items ?? []}
            onChange={async () => {
              await Promise.all([list.reload(), agents.reload()]);
            }}
          />
        ))}
      </ul>
    </div>
  );
}

/** The form that creates a vault (its secrets are added one by one). */
function VaultForm({ onDone, onCancel }: { onDone: () => void; onCancel: () => void }) {
  const client = useClient();
  const [f, setF] = useState({ name: "", description: "" });
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await client.createVault({ name: f.name.trim(), description: f.description.trim() || undefined });
      onDone();
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card form-grid" onSubmit={submit} aria-label="New vault">
      <label>
        Name
        <input value={f.name} onChange={(e) => setF({ ...f, name: e.target.value })} required maxLength={200} />
      </label>
      <label>
        Description
        <input value={f.description} onChange={(e) => setF({ ...f, description: e.target.value })} maxLength={4096} />
      </label>
      <FormFooter error={error} busy={busy} onCancel={onCancel} />
    </form>
  );
}

function VaultCard({ vault, agents, onChange }: { vault: Vault; agents: Agent[]; onChange: () => Promise<void> }) {
  const client = useClient();
  const [editing, setEditing] = useState<SecretFields | null>(null);
  const [status, setStatus] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const secrets = vault.secrets ?? [];
  const users = agentsUsing(vault.vault_id, agents);

  const removeSecret = async (name: string) => {
    if (!window.confirm(`Remove secret ${name} from vault ${vault.name}? Agents using the vault lose it.`)) return;
    setError(null);
    setStatus(null);
    try {
      await client.deleteSecret(vault.vault_id, name);
      setStatus(`Removed ${name}.`);
    } catch (err) {
      setError(errorText(err));
    }
    await onChange();
  };
  const remove = async () => {
    if (!window.confirm(`Delete vault ${vault.name} and its secrets?`)) return;
    setError(null);
    setStatus(null);
    try {
      await client.deleteVault(vault.vault_id);
    } catch (err) {
      setError(deleteErrorText(err, vault, agents));
      return;
    }
    await onChange();
  };
  return (
    <li className="card vault-card" data-testid="vault-card">
      <div className="card-head">
        <h3>{vault.name}</h3>
        <span className="muted small">v{vault.version}</span>
      </div>
      {vault.description && <p className="muted small">{vault.description}</p>}
      <dl className="facts">
        <dt>ID</dt>
        <dd>
          <code>{vault.vault_id}</code>
        </dd>
        <dt>Agents</dt>
        <dd>{users.map((a) => a.name).join(", ") || "none"}</dd>
      </dl>
      {secrets.length === 0 ? (
        <p className="muted small">No secrets yet.</p>
      ) : (
        <ul className="secrets" aria-label={`Secrets of ${vault.name}`}>
          {secrets.map((s) => (
            <li key={s.name} data-testid="secret-row">
              <div className="secret-main">
                <code className="secret-name">{s.name}</code>
                <span className="small">
                  → <span className="secret-dest">{destination(s)}</span>
                </span>
                <span className="muted small">
                  {delivery(s)} · set {relativeTime(s.updated_at)}
                </span>
              </div>
              <div className="actions">
                <button onClick={() => setEditing(secretFields(s))} aria-label={`Replace ${s.name}`}>
                  Replace
                </button>
                <button className="danger" onClick={() => void removeSecret(s.name)} aria-label={`Remove ${s.name}`}>
                  Remove
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
      {editing && (
        <SecretForm
          key={editing.name || "new"}
          vault={vault}
          initial={editing}
          onSaved={async (name) => {
            setStatus(`Saved ${name}.`);
            setEditing(null);
            await onChange();
          }}
          onCancel={() => setEditing(null)}
        />
      )}
      {status && (
        <p role="status" className="ok small">
          {status}
        </p>
      )}
      {error && (
        <p role="alert" className="error small">
          {error}
        </p>
      )}
      <div className="actions">
        {!editing && (
          <button
            onClick={() => {
              setStatus(null);
              setEditing({ ...blankSecret });
            }}
          >
            Add secret
          </button>
        )}
        <button className="danger" onClick={() => void remove()}>
          Delete vault
        </button>
      </div>
    </li>
  );
}

/**
 * Adds a secret or replaces one (a replacement needs its value again).
 * The value input is uncontrolled: the value lives only in the input
 * until it is sent, never in React state or a DOM attribute, and is
 * cleared as soon as the request is made.
 */
function SecretForm({
  vault,
  initial,
  onSaved,
  onCancel,
}: {
  vault: Vault;
  initial: SecretFields;
  onSaved: (name: string) => Promise<void>;
  onCancel: () => void;
}) {
  const client = useClient();
  const replacing = initial.name !== "";
  const [f, setF] = useState<SecretFields>(initial);
  const value = useRef<HTMLInputElement>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const set = <K extends keyof SecretFields>(k: K, v: string) => setF({ ...f, [k]: v });

  const submit = async (e: FormEvent) => {
    e.preventDefault();
    const input = value.current;
    if (!input) return;
    const req = secretRequest(f, input.value);
    input.value = "";
    setBusy(true);
    setError(null);
    try {
      await client.putSecret(vault.vault_id, f.name.trim(), req);
      await onSaved(f.name.trim());
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  return (
    <form className="form-grid secret-form" onSubmit={submit} aria-label={replacing ? `Replace ${initial.name}` : `New secret in ${vault.name}`}>
      <label>
        Name (environment variable)
        <input
          value={f.name}
          onChange={(e) => set("name", e.target.value)}
          required
          disabled={replacing}
          pattern={SECRET_NAME}
          placeholder="GITHUB_TOKEN"
          spellCheck={false}
        />
      </label>
      <label>
        Value
        <input ref={value} type="password" autoComplete="new-password" required maxLength={16384} placeholder={replacing ? "the new value (required)" : ""} />
      </label>
      <label>
        Host
        <input value={f.host} onChange={(e) => set("host", e.target.value)} required placeholder="api.github.com or *.example.com" spellCheck={false} />
      </label>
      <label>
        Path prefix
        <input value={f.path_prefix} onChange={(e) => set("path_prefix", e.target.value)} placeholder="every path" spellCheck={false} />
      </label>
      <label>
        Header
        <input value={f.header} onChange={(e) => set("header", e.target.value)} placeholder="Authorization" spellCheck={false} />
      </label>
      <label>
        Format
        <input value={f.format} onChange={(e) => set("format", e.target.value)} placeholder="Bearer {value}" spellCheck={false} />
      </label>
      <FormFooter error={error} busy={busy} onCancel={onCancel} saveLabel="Save secret" />
    </form>
  );
}
