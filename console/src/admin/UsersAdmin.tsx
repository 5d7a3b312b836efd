// Users (administrators): the list with each one's role and state to
// change, a form that adds a service user (keys only), and a user's keys.
import { useMemo, useState, type FormEvent } from "react";
import { useClient, useMe } from "../auth";
import { errorText, type Client } from "../api/client";
import { roles, roleScopes, type Role, type User, type UserRequest } from "../api/identity";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { relativeTime } from "../ui/format";
import { FormFooter } from "../ui/FormFooter";
import { userLabel } from "../permissions";
import { KeysPanel, type KeyCalls } from "../account/KeysPanel";

/** Every user, page after page (at most 2000). */
export async function allUsers(client: Client): Promise<User[]> {
  const out: User[] = [];
  let cursor: string | undefined;
  for (let i = 0; i < 10; i++) {
    const page = await client.users(cursor);
    out.push(...page.items);
    if (!page.next_cursor) break;
    cursor = page.next_cursor;
  }
  return out;
}

export function UsersAdmin() {
  const client = useClient();
  const me = useMe();
  const list = useAsync(() => allUsers(client), [client]);
  const [adding, setAdding] = useState(false);
  const [keysOf, setKeysOf] = useState<User | null>(null);
  const [pending, setPending] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);

  const update = async (u: User, req: UserRequest) => {
    setPending(u.user_id);
    setError(null);
    try {
      await client.updateUser(u.user_id, req);
    } catch (err) {
      setError(`${userLabel(u)}: ${errorText(err)}`);
    } finally {
      setPending(null);
    }
    await list.reload();
  };
  const toggle = (u: User) => {
    if (!u.disabled && !window.confirm(`Disable ${userLabel(u)}? Their keys and sign-ins stop working until enabled again.`)) return;
    void update(u, { disabled: !u.disabled });
  };
  const users = list.data ?? [];
  return (
    <div className="users">
      <div className="page-head">
        <h2>Users</h2>
        <button className="primary" onClick={() => setAdding(true)}>
          Add service user
        </button>
      </div>
      <p className="muted small">
        People appear here once they sign in through the identity provider. Service users (for programs) hold API keys only.
      </p>
      {adding && (
        <AddUser
          onDone={(u) => {
            setAdding(false);
            setKeysOf(u);
            void list.reload();
          }}
          onCancel={() => setAdding(false)}
        />
      )}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      {list.error !== undefined && <ErrorBanner error={list.error} onRetry={list.reload} />}
      {!list.data && !list.error && <Loading label="Loading users…" />}
      {list.data && users.length === 0 && <Empty title="No users" />}
      {users.length > 0 && (
        <div className="table-wrap">
          <table className="table" aria-label="Users">
            <thead>
              <tr>
                <th scope="col">User</th>
                <th scope="col">Role</th>
                <th scope="col">State</th>
                <th scope="col">Last sign-in</th>
                <th scope="col">
                  <span className="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {users.map((u) => {
                const self = u.user_id === me.user.user_id;
                const busy = pending === u.user_id;
                return (
                  <tr key={u.user_id} data-testid="user-row">
                    <td>
                      <div className="cell-main">
                        {userLabel(u)} <span className="badge">{u.kind}</span>
                        {self && <span className="muted small"> (you)</span>}
                      </div>
                      <code className="muted small">{u.user_id}</code>
                      {u.email && u.email !== userLabel(u) && <div className="muted small">{u.email}</div>}
                    </td>
                    <td>
                      <select
                        aria-label={`Role of ${userLabel(u)}`}
                        value={u.role}
                        disabled={self || busy}
                        title={self ? "You cannot change your own role" : undefined}
                        onChange={(e) => void update(u, { role: e.target.value as Role })}
                      >
                        {roles.map((r) => (
                          <option key={r} value={r}>
                            {r}
                          </option>
                        ))}
                      </select>
                    </td>
                    <td>
                      <span className={`badge ${u.disabled ? "user-disabled" : "user-active"}`}>{u.disabled ? "disabled" : "active"}</span>
                    </td>
                    <td title={u.last_login_at ?? undefined}>{u.kind === "service" ? "—" : relativeTime(u.last_login_at ?? undefined)}</td>
                    <td className="actions">
                      <button onClick={() => setKeysOf(keysOf?.user_id === u.user_id ? null : u)} aria-pressed={keysOf?.user_id === u.user_id}>
                        Keys
                      </button>
                      {!self && (
                        <button className={u.disabled ? undefined : "danger"} disabled={busy} onClick={() => toggle(u)}>
                          {u.disabled ? "Enable" : "Disable"}
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
      {keysOf && <UserKeys key={keysOf.user_id} user={keysOf} onClose={() => setKeysOf(null)} />}
    </div>
  );
}

function UserKeys({ user, onClose }: { user: User; onClose: () => void }) {
  const client = useClient();
  const calls = useMemo<KeyCalls>(
    () => ({
      list: () => client.userAPIKeys(user.user_id),
      create: (k) => client.createUserAPIKey(user.user_id, k),
      revoke: (kid) => client.revokeUserAPIKey(user.user_id, kid),
    }),
    [client, user.user_id],
  );
  return (
    <section className="card user-keys" aria-label={`Keys of ${userLabel(user)}`}>
      <div className="card-head">
        <h3>Keys of {userLabel(user)}</h3>
        <button className="ghost" onClick={onClose}>
          Close
        </button>
      </div>
      <KeysPanel
        calls={calls}
        owner={userLabel(user)}
        scopes={roleScopes[user.role as Role] ?? ["read"]}
        canWrite={!user.disabled}
        deps={[calls]}
      />
    </section>
  );
}

function AddUser({ onDone, onCancel }: { onDone: (u: User) => void; onCancel: () => void }) {
  const client = useClient();
  const [id, setId] = useState("");
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("member");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const req: UserRequest = { kind: "service", role };
      if (id.trim()) req.user_id = id.trim();
      if (name.trim()) req.display_name = name.trim();
      onDone(await client.createUser(req));
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form className="card form-grid" onSubmit={submit} aria-label="New service user">
      <label>
        User id
        <input
          value={id}
          onChange={(e) => setId(e.target.value)}
          pattern="[a-z0-9][a-z0-9._\-]{0,62}"
          title="1 to 63 of a-z 0-9 . _ - (not starting with . _ -)"
          placeholder="ci-bot (empty: generated)"
        />
      </label>
      <label>
        Display name
        <input value={name} onChange={(e) => setName(e.target.value)} placeholder="CI deploys" />
      </label>
      <label>
        Role
        <select value={role} onChange={(e) => setRole(e.target.value as Role)}>
          {roles.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </select>
      </label>
      <FormFooter error={error} busy={busy} onCancel={onCancel} saveLabel="Add user" />
    </form>
  );
}
