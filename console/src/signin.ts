// What sign-in through the identity provider needs besides React: the
// sentence for a failed sign-in's reason, the address that starts one and
// returns here, and the URL without the failure once it is shown.

/** The query parameter a failed sign-in comes back with (/?sign_in_error=reason). */
export const SIGN_IN_ERROR = "sign_in_error";

const reasons: Record<string, string> = {
  no_flow: "The sign-in was not started in this browser, or took longer than 10 minutes. Please sign in again.",
  bad_flow: "The sign-in could not be checked: it expired or was tampered with. Please sign in again.",
  provider_refused: "The identity provider did not sign you in (you may have cancelled, or it refused).",
  invalid_token: "The identity provider's answer could not be verified, so you were not signed in.",
  user_refused: "Your account may not sign in here: it may be disabled. Ask an administrator.",
  flow_used: "This sign-in was already used. Please sign in again.",
  not_offered: "This server does not offer sign-in through an identity provider. Use an API key.",
};

/** A readable sentence for a sign_in_error reason. */
export function signInErrorText(reason: string): string {
  const known = reasons[reason];
  if (known) return known;
  const shown = reason.replace(/[^a-z0-9_.-]/gi, "").slice(0, 40);
  return `Signing in failed${shown ? ` (${shown})` : ""}. Please try again.`;
}

/** The reason a URL's query names, or null. */
export function signInError(search: string): string | null {
  return new URLSearchParams(search).get(SIGN_IN_ERROR);
}

/** The URL (path, query and fragment) without sign_in_error, for history.replaceState. */
export function withoutSignInError(pathname: string, search: string, hash: string): string {
  const q = new URLSearchParams(search);
  q.delete(SIGN_IN_ERROR);
  const s = q.toString();
  return pathname + (s ? "?" + s : "") + hash;
}

/**
 * The address that starts signing in and comes back to the page at
 * pathname, search and hash (without sign_in_error): loginUrl?next=...
 */
export function loginHref(loginUrl: string, pathname: string, search: string, hash: string): string {
  const next = withoutSignInError(pathname || "/", search, hash);
  const sep = loginUrl.includes("?") ? "&" : "?";
  return `${loginUrl}${sep}next=${encodeURIComponent(next)}`;
}
