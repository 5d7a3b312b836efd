// Signing in: through the server's identity provider (OpenID Connect; the
// server keeps the session in an HttpOnly cookie), or with an API key kept
// in this browser tab's session storage only (gone when the tab closes),
// the bootstrap administrator's way; behind an authenticating gateway the
// gateway's headers sign every request in already. The Client built from
// these, and who the caller is (GET /api/v1/user/current), for the whole
// console.
import { createContext, useCallback, useContext, useEffect, useMemo, useState, type FormEvent, type ReactNode } from "react";
import { ApiError, Client, errorText } from "./api/client";
import type { AuthProvider, CurrentUser, Scope } from "./api/identity";
import { can } from "./permissions";
import { loginHref, signInError, signInErrorText, withoutSignInError } from "./signin";

const STORAGE_KEY = "astrabox.apiKey";

/** How the console is signed in: an API key, the session cookie, or
 * nothing the console sends (an authenticating gateway's headers). */
export type Via = "key" | "cookie" | "gateway";

interface Auth {
  client: Client;
  me: CurrentUser;
  via: Via;
  signOut: () => void;
}

const AuthContext = createContext<Auth | null>(null);

function useAuth(name: string): Auth {
  const a = useContext(AuthContext);
  if (!a) throw new Error(`${name} outside AuthGate`);
  return a;
}

/** The signed-in client; only under <AuthGate>. */
export function useClient(): Client {
  return useAuth("useClient").client;
}

export function useSignOut(): () => void {
  return useAuth("useSignOut").signOut;
}

/** Who is signed in, with this request's scopes. */
export function useMe(): CurrentUser {
  return useAuth("useMe").me;
}

/** How the console is signed in. */
export function useVia(): Via {
  return useAuth("useVia").via;
}

/** Whether the signed-in caller has scope. */
export function useCan(scope: Scope): boolean {
  return can(useAuth("useCan").me, scope);
}

type State =
  | { phase: "loading" }
  | { phase: "out"; provider: AuthProvider | null; notice: string | null }
  | { phase: "in"; client: Client; me: CurrentUser; via: Via };

const expired = (err: unknown) => err instanceof ApiError && (err.status === 401 || err.code === "TOKEN_EXPIRED");

/** Renders children once signed in, the sign-in page before. */
export function AuthGate({ children }: { children: ReactNode }) {
  // A failed sign-in comes back as /?sign_in_error=reason: shown once,
  // then gone from the address bar.
  const [failed] = useState(() => signInError(window.location.search));
  const [state, setState] = useState<State>({ phase: "loading" });

  /** The sign-in page, with what the server offers. */
  const signedOut = useCallback(async (notice: string | null) => {
    let provider: AuthProvider | null = null;
    try {
      provider = (await new Client(null).authSession()).provider;
    } catch {
      // an older server, or none reachable: keys only
    }
    setState({ phase: "out", provider, notice });
  }, []);

  useEffect(() => {
    let live = true;
    const set = (s: State) => live && setState(s);
    if (failed !== null) {
      const { pathname, search, hash } = window.location;
      window.history.replaceState(window.history.state, "", withoutSignInError(pathname, search, hash));
    }
    void (async () => {
      let notice = failed === null ? null : signInErrorText(failed);
      // The tab's key first: the bootstrap administrator, or a key user.
      const key = sessionStorage.getItem(STORAGE_KEY);
      if (key !== null) {
        const client = new Client(key);
        try {
          return set({ phase: "in", client, me: await client.currentUser(), via: "key" });
        } catch (err) {
          if (expired(err)) sessionStorage.removeItem(STORAGE_KEY);
          notice ??= expired(err) ? "The API key of this tab no longer works. Sign in again." : errorText(err);
        }
      }
      // Then the browser's session, signed in through the provider.
      const client = new Client(null);
      let provider: AuthProvider | null = null;
      try {
        const session = await client.authSession();
        provider = session.provider;
        if (session.user && failed === null) return set({ phase: "in", client, me: await client.currentUser(), via: "cookie" });
      } catch (err) {
        if (!expired(err)) notice ??= errorText(err);
      }
      // Behind an authenticating gateway, its headers sign every request in.
      if (failed === null && provider === null) {
        try {
          return set({ phase: "in", client, me: await client.currentUser(), via: "gateway" });
        } catch {
          // not signed in: the sign-in page
        }
      }
      set({ phase: "out", provider, notice });
    })();
    return () => {
      live = false;
    };
  }, [failed]);

  const auth = useMemo<Auth | null>(() => {
    if (state.phase !== "in") return null;
    const { client, me, via } = state;
    const signOut = () => {
      if (via === "key") {
        sessionStorage.removeItem(STORAGE_KEY);
        void signedOut(null);
        return;
      }
      setState({ phase: "loading" });
      void client.logout().then(
        () => signedOut(null),
        (err: unknown) => signedOut(expired(err) ? null : `Signing out failed: ${errorText(err)}`),
      );
    };
    return { client, me, via, signOut };
  }, [state, signedOut]);

  if (state.phase === "loading") {
    return (
      <main className="signin">
        <div className="loading" role="status">
          <span className="spinner" aria-hidden="true" /> Loading…
        </div>
      </main>
    );
  }
  if (state.phase === "out") {
    return (
      <SignIn
        provider={state.provider}
        notice={state.notice}
        onSignedIn={(key, me) => {
          sessionStorage.setItem(STORAGE_KEY, key);
          setState({ phase: "in", client: new Client(key), me, via: "key" });
        }}
      />
    );
  }
  return <AuthContext.Provider value={auth}>{children}</AuthContext.Provider>;
}

interface SignInProps {
  provider: AuthProvider | null;
  notice: string | null;
  onSignedIn: (key: string, me: CurrentUser) => void;
}

function SignIn({ provider, notice, onSignedIn }: SignInProps) {
  const [key, setKey] = useState("");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const me = await new Client(key.trim()).currentUser();
      onSignedIn(key.trim(), me);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };
  const { pathname, search, hash } = window.location;
  return (
    <main className="signin">
      <div className="card signin-card">
        <h1 id="signin-title">
          <img src="/console/favicon.svg" alt="" width={28} height={28} /> AstraBox
        </h1>
        {notice && (
          <p role="alert" className="banner error" data-testid="signin-notice">
            {notice}
          </p>
        )}
        {provider && (
          <>
            <a className="button primary wide" href={loginHref(provider.login_url, pathname, search, hash)}>
              Sign in with {provider.name}
            </a>
            <p className="divider muted small">
              <span>or with an API key</span>
            </p>
          </>
        )}
        <form onSubmit={submit} className="signin-form" aria-labelledby="signin-title">
          {!provider && <p className="muted">Sign in with the server's API key. It is kept in this tab only.</p>}
          <label htmlFor="api-key">API key</label>
          <input
            id="api-key"
            type="password"
            autoComplete="current-password"
            autoFocus={!provider}
            required
            value={key}
            onChange={(e) => setKey(e.target.value)}
          />
          <p className="hint muted">
            Your own key (<code>abx_…</code>), or the server's: as root on the server,{" "}
            <code>cat /var/lib/astrabox/credentials</code>. It is kept in this tab only.
          </p>
          {error && (
            <p role="alert" className="error">
              {error}
            </p>
          )}
          <button type="submit" className={provider ? undefined : "primary"} disabled={busy || !key.trim()}>
            {busy ? "Signing in…" : "Sign in"}
          </button>
        </form>
      </div>
    </main>
  );
}
