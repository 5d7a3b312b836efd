// What the signed-in caller may do, as the console decides what to offer
// (the server decides what is allowed: this only hides what would fail).
import type { Agent } from "./api/types";
import type { CurrentUser, Role, Scope } from "./api/identity";
import { roleScopes } from "./api/identity";

/** Whether the caller's request scopes include scope. */
export function can(me: CurrentUser, scope: Scope): boolean {
  return (me.scopes as string[]).includes(scope);
}

/** Whether the caller may change an Agent and its access: an
 * administrator, its owner or one of its admins, with the write scope. */
export function canManageAgent(me: CurrentUser, agent: Agent): boolean {
  if (!can(me, "write")) return false;
  if (can(me, "admin")) return true;
  const id = me.user.user_id;
  return agent.owner_id === id || (agent.admins ?? []).includes(id);
}

/** The scopes a key of the caller's may have: its role's. */
export function keyScopes(me: CurrentUser): Scope[] {
  return roleScopes[me.user.role as Role] ?? ["read"];
}

/** A person's name as shown: their display name, else email, else id. */
export function userLabel(u: { user_id: string; display_name?: string; email?: string }): string {
  return u.display_name || u.email || u.user_id;
}
