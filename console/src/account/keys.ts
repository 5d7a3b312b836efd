// API keys as the console shows them: their state, and the lifetimes the
// create form offers.
import type { APIKey } from "../api/identity";

export type KeyState = "active" | "expired" | "revoked";

export function keyState(k: APIKey, now = Date.now()): KeyState {
  if (k.revoked_at) return "revoked";
  if (k.expires_at && Date.parse(k.expires_at) <= now) return "expired";
  return "active";
}

const day = 86400;

/** The create form's lifetimes: label and seconds (0: no expiry of its own). */
export const lifetimes: { label: string; seconds: number }[] = [
  { label: "7 days", seconds: 7 * day },
  { label: "30 days", seconds: 30 * day },
  { label: "90 days", seconds: 90 * day },
  { label: "1 year", seconds: 365 * day },
  { label: "No expiry", seconds: 0 },
];

/** Keys newest first, the active ones before the others. */
export function sortKeys(keys: APIKey[], now = Date.now()): APIKey[] {
  const rank = (k: APIKey) => (keyState(k, now) === "active" ? 0 : 1);
  return [...keys].sort((a, b) => rank(a) - rank(b) || Date.parse(b.created_at) - Date.parse(a.created_at));
}
