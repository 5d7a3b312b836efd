// The signed-in user's menu in the top bar: who they are (name, email,
// role, user id, how they signed in), their API keys, and signing out.
import { useEffect, useId, useRef, useState } from "react";
import { useMe, useSignOut, useVia } from "../auth";
import { href } from "../router";
import { userLabel } from "../permissions";
import { CopyButton } from "../ui/CopyButton";

export function UserMenu() {
  const me = useMe();
  const via = useVia();
  const signOut = useSignOut();
  const [open, setOpen] = useState(false);
  const root = useRef<HTMLDivElement>(null);
  const panelId = useId();
  const u = me.user;
  const name = userLabel(u);

  useEffect(() => {
    if (!open) return;
    const onDown = (e: MouseEvent) => {
      if (!root.current?.contains(e.target as Node)) setOpen(false);
    };
    const onKey = (e: KeyboardEvent) => {
      if (e.key === "Escape") setOpen(false);
    };
    const onNav = () => setOpen(false);
    document.addEventListener("mousedown", onDown);
    document.addEventListener("keydown", onKey);
    window.addEventListener("hashchange", onNav);
    return () => {
      document.removeEventListener("mousedown", onDown);
      document.removeEventListener("keydown", onKey);
      window.removeEventListener("hashchange", onNav);
    };
  }, [open]);

  return (
    <div className="user-menu" ref={root}>
      <button
        className="ghost user-button"
        aria-expanded={open}
        aria-controls={panelId}
        aria-label={`Account: ${name}`}
        data-testid="user-menu"
        onClick={() => setOpen((o) => !o)}
      >
        <span className="avatar" aria-hidden="true">
          {initials(name)}
        </span>
        <span className="user-name">{name}</span>
        <span className={`badge role-${u.role}`}>{u.role}</span>
      </button>
      {open && (
        <div className="user-panel card" id={panelId} role="region" aria-label="Account">
          <div className="user-who">
            <strong>{name}</strong>
            {u.email && u.email !== name && <span className="muted small">{u.email}</span>}
          </div>
          <dl className="facts">
            <dt>Role</dt>
            <dd>
              <span className={`badge role-${u.role}`} data-testid="user-role">
                {u.role}
              </span>
            </dd>
            <dt>User id</dt>
            <dd className="user-id">
              <code data-testid="user-id">{u.user_id}</code>
              <CopyButton text={u.user_id} label="Copy user id" />
            </dd>
            <dt>Signed in</dt>
            <dd>{signedIn(via, me.key_id)}</dd>
            <dt>Scopes</dt>
            <dd>{me.scopes.join(", ") || "none"}</dd>
          </dl>
          <p className="muted small">Others share agents with you by your user id.</p>
          <div className="actions">
            <a className="button" href={href("keys")} onClick={() => setOpen(false)}>
              API keys
            </a>
            {via !== "gateway" && (
              <button className="push-right" onClick={signOut}>
                Sign out
              </button>
            )}
          </div>
        </div>
      )}
    </div>
  );
}

function signedIn(via: string, keyId: string | undefined): string {
  if (via === "cookie") return "through the identity provider";
  if (via === "gateway") return "by your organization's gateway";
  return keyId ? `with key ${keyId}` : "with the server's key";
}

/** "Test alice" is "TA"; "ci-bot" is "C". */
function initials(name: string): string {
  const words = name.replace(/@.*/, "").split(/[\s._-]+/).filter(Boolean);
  return (words.length > 1 ? words[0][0] + words[1][0] : (words[0]?.[0] ?? "?")).toUpperCase();
}
