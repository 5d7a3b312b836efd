// Sign-in with the API key, kept in this browser tab's session storage
// only (gone when the tab closes), and the Client built from it.
import { createContext, useContext, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { Client, errorText } from "./api/client";

const STORAGE_KEY = "astrabox.apiKey";

interface Auth {
  client: Client;
  signOut: () => void;
}

const AuthContext = createContext<Auth | null>(null);

/** The signed-in client; only under <AuthGate>. */
export function useClient(): Client {
  const a = useContext(AuthContext);
  if (!a) throw new Error("useClient outside AuthGate");
  return a.client;
}

export function useSignOut(): () => void {
  const a = useContext(AuthContext);
  if (!a) throw new Error("useSignOut outside AuthGate");
  return a.signOut;
}

/** Renders children once signed in, the sign-in form before. */
export function AuthGate({ children }: { children: ReactNode }) {
  const [key, setKey] = useState(() => sessionStorage.getItem(STORAGE_KEY));
  const auth = useMemo<Auth | null>(
    () =>
      key === null
        ? null
        : {
            client: new Client(key),
            signOut: () => {
              sessionStorage.removeItem(STORAGE_KEY);
              setKey(null);
            },
          },
    [key],
  );
  if (auth === null) {
    return (
      <SignIn
        onSignedIn={(k) => {
          sessionStorage.setItem(STORAGE_KEY, k);
          setKey(k);
        }}
      />
    );
  }
  return <AuthContext.Provider value={auth}>{children}</AuthContext.Provider>;
}

function SignIn({ onSignedIn }: { onSignedIn: (key: string) => void }) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await new Client(key.trim()).json("GET", "/v1/sandboxes", undefined, { pageSize: 1 });
      onSignedIn(key.trim());
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <main className="signin">
      <form onSubmit={submit} className="card signin-card" aria-labelledby="signin-title">
        <h1 id="signin-title">
          <img src="/console/favicon.svg" alt="" width={28} height={28} /> AstraBox
        </h1>
        <p className="muted">Sign in with the server's API key. It is kept in this tab only.</p>
        <label htmlFor="api-key">API key</label>
        <input
          id="api-key"
          type="password"
          autoComplete="current-password"
          autoFocus
          required
          value={key}
          onChange={(e) => setKey(e.target.value)}
        />
        <p className="hint muted">
          As root on the server: <code>cat /var/lib/astrabox/credentials</code>
        </p>
        {error && (
          <p role="alert" className="error">
            {error}
          </p>
        )}
        <button type="submit" className="primary" disabled={busy || !key.trim()}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  );
}
