// A user's API keys: the list, a form that makes one (its text shown this
// once, with a copy button) and revoking. The caller's own keys (the API
// keys page) or, for an administrator, another user's (the Users page).
import { useState, type FormEvent } from "react";
import { errorText } from "../api/client";
import type { Page } from "../api/types";
import type { APIKey, APIKeyRequest, NewAPIKey, Scope } from "../api/identity";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { relativeTime } from "../ui/format";
import { FormFooter } from "../ui/FormFooter";
import { CopyButton } from "../ui/CopyButton";
import { keyState, lifetimes, sortKeys } from "./keys";

export interface KeyCalls {
  list: () => Promise<Page<APIKey>>;
  create: (k: APIKeyRequest) => Promise<NewAPIKey>;
  revoke: (id: string) => Promise<APIKey>;
}

interface Props {
  calls: KeyCalls;
  /** Whose keys, in labels: "your" or the user's name. */
  owner: string;
  /** The scopes a new key may have (its owner's role's). */
  scopes: Scope[];
  /** Whether keys may be made and revoked here (the write scope). */
  canWrite: boolean;
  /** Changes whenever calls target another user or client. */
  deps: readonly unknown[];
}

export function KeysPanel({ calls, owner, scopes, canWrite, deps }: Props) {
  const list = useAsync(() => calls.list(), deps);
  const [creating, setCreating] = useState(false);
  const [made, setMade] = useState<NewAPIKey | null>(null);
  const [error, setError] = useState<string | null>(null);
  const revoke = async (k: APIKey) => {
    if (!window.confirm(`Revoke the key ${k.name} (${k.key_id})? Whatever uses it stops working at once.`)) return;
    setError(null);
    try {
      await calls.revoke(k.key_id);
    } catch (err) {
      setError(errorText(err));
    }
    await list.reload();
  };
  const keys = sortKeys(list.data?.items ?? []);
  return (
    <div className="keys">
      {canWrite && !creating && !made && (
        <div>
          <button className="primary" onClick={() => setCreating(true)}>
            New API key
          </button>
        </div>
      )}
      {creating && (
        <KeyForm
          owner={owner}
          scopes={scopes}
          create={calls.create}
          onMade={(k) => {
            setCreating(false);
            setMade(k);
            void list.reload();
          }}
          onCancel={() => setCreating(false)}
        />
      )}
      {made && <MadeKey made={made} onDone={() => setMade(null)} />}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading label="Loading keys…" />}
      {list.data && keys.length === 0 && <Empty title="No API keys">{canWrite ? "Make one for the CLI, an SDK or a CI job." : undefined}</Empty>}
      {keys.length > 0 && (
        <div className="table-wrap">
          <table className="table keys-table" aria-label={`API keys of ${owner}`}>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Scopes</th>
                <th scope="col">State</th>
                <th scope="col">Created</th>
                <th scope="col">Expires</th>
                <th scope="col">Last used</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {keys.map((k) => {
                const state = keyState(k);
                return (
                  <tr key={k.key_id} data-testid="key-row">
                    <td>
                      <div className="cell-main">{k.name}</div>
                      <code className="muted small">{k.key_id}</code>
                    </td>
                    <td>{k.scopes.join(", ")}</td>
                    <td>
                      <span className={`badge key-${state}`}>{state}</span>
                    </td>
                    <td title={k.created_at}>{relativeTime(k.created_at)}</td>
                    <td title={k.expires_at ?? undefined}>{k.expires_at ? relativeTime(k.expires_at) : "never"}</td>
                    <td title={k.last_used_at ?? undefined}>{relativeTime(k.last_used_at ?? undefined)}</td>
                    <td className="actions">
                      {canWrite && state === "active" && (
                        <button className="danger" onClick={() => void revoke(k)}>
                          Revoke
                        </button>
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

interface FormProps {
  owner: string;
  scopes: Scope[];
  create: (k: APIKeyRequest) => Promise<NewAPIKey>;
  onMade: (k: NewAPIKey) => void;
  onCancel: () => void;
}

function KeyForm({ owner, scopes, create, onMade, onCancel }: FormProps) {
  const [name, setName] = useState("");
  const [picked, setPicked] = useState<Scope[]>(scopes.filter((s) => s !== "admin"));
  const [life, setLife] = useState(lifetimes[2].seconds);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (picked.length === 0) {
      setError("Pick at least one scope.");
      return;
    }
    setBusy(true);
    setError(null);
    try {
      const req: APIKeyRequest = { name: name.trim(), scopes: scopes.filter((s) => picked.includes(s)) };
      if (life > 0) req.expires_in_seconds = life;
      onMade(await create(req));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card form-grid" onSubmit={submit} aria-label="New API key">
      <label>
        Name
        <input value={name} onChange={(e) => setName(e.target.value)} maxLength={100} required placeholder="laptop, ci-deploy…" />
      </label>
      <label>
        Expires after
        <select value={life} onChange={(e) => setLife(Number(e.target.value))}>
          {lifetimes.map((l) => (
            <option key={l.seconds} value={l.seconds}>
              {l.label}
            </option>
          ))}
        </select>
      </label>
      <fieldset className="span-all vault-picks">
        <legend>Scopes</legend>
        {scopes.map((s) => (
          <label key={s} className="check">
            <input
              type="checkbox"
              checked={picked.includes(s)}
              onChange={(e) => setPicked(e.target.checked ? [...picked, s] : picked.filter((p) => p !== s))}
            />
            {s}
            <span className="muted small">{scopeHelp[s]}</span>
          </label>
        ))}
      </fieldset>
      <p className="muted small span-all">
        The key acts as {owner}, within {owner === "you" ? "your" : "their"} role. It is shown once, when it is made.
      </p>
      <FormFooter error={error} busy={busy} onCancel={onCancel} saveLabel="Create key" />
    </form>
  );
}

const scopeHelp: Record<Scope, string> = {
  read: "see",
  write: "create, change and delete",
  admin: "users, profiles, vaults",
};

/** A key just made: its text, this once. */
function MadeKey({ made, onDone }: { made: NewAPIKey; onDone: () => void }) {
  return (
    <section className="card new-key" aria-label="New key" data-testid="new-key-card">
      <h3>Key {made.name} is made</h3>
      <p>
        <strong>Copy it now: it is not shown again.</strong> Whoever holds it acts as its owner.
      </p>
      <div className="key-text">
        <code data-testid="new-key">{made.key}</code>
        <CopyButton text={made.key} label="Copy key" className="primary" />
      </div>
      <p className="muted small">
        Use it as the <code>OPEN-SANDBOX-API-KEY</code> header, or with <code>astrabox login --server {window.location.origin}</code>.
      </p>
      <div className="actions">
        <button onClick={onDone}>Done</button>
      </div>
    </section>
  );
}
