// An Agent's sharing as the form edits it: its access from the Agent
// record, user ids typed in a list, whether anything changed, and how a
// user id reads.
import type { Agent } from "../api/types";
import type { AgentAccess, User, Visibility } from "../api/identity";
import { userLabel } from "../permissions";

/** An Agent's access with its lists present. */
export interface Access {
  visibility: Visibility;
  allowed_user_ids: string[];
  admins: string[];
}

/** An Agent's access (a new Agent's: private, nobody named). */
export function accessOf(a: Agent | null): Access {
  const v = a?.visibility;
  return {
    visibility: v === "shared" || v === "public" ? v : "private",
    allowed_user_ids: [...(a?.allowed_user_ids ?? [])],
    admins: [...(a?.admins ?? [])],
  };
}

/** Whether two accesses differ (lists compared as sets). */
export function accessChanged(a: AgentAccess, b: AgentAccess): boolean {
  const same = (x?: string[] | null, y?: string[] | null) => {
    const sx = new Set(x ?? []);
    const sy = new Set(y ?? []);
    return sx.size === sy.size && [...sx].every((id) => sy.has(id));
  };
  return a.visibility !== b.visibility || !same(a.allowed_user_ids, b.allowed_user_ids) || !same(a.admins, b.admins);
}

/** ids with the user ids of text added ("a, b c": split on commas and spaces), each once. */
export function addIds(ids: readonly string[], text: string): string[] {
  const out = [...ids];
  for (const id of text.split(/[\s,]+/)) if (id && !out.includes(id)) out.push(id);
  return out;
}

/** The access to save: a list that does not apply is sent empty. */
export function accessRequest(visibility: Visibility, allowed: string[], admins: string[]): AgentAccess {
  return { visibility, allowed_user_ids: visibility === "shared" ? allowed : [], admins };
}

/** How a user id reads: "you", a known user's name, or the id. */
export function whoIs(id: string, me: string, users: readonly User[]): string {
  if (id === me) return "you";
  const u = users.find((x) => x.user_id === id);
  return u ? userLabel(u) : id;
}

export const visibilities: { id: Visibility; label: string; help: string }[] = [
  { id: "private", label: "Private", help: "its owner, its admins and administrators" },
  { id: "shared", label: "Shared", help: "also the users named below" },
  { id: "public", label: "Public", help: "everyone in the organization" },
];
