// What can be done to a sandbox in each state.
import type { Client } from "../api/client";
import type { Sandbox } from "../api/types";

export type Action = "pause" | "resume" | "renew" | "delete";

export const actionLabels: Record<Action, string> = {
  pause: "Pause",
  resume: "Resume",
  renew: "Renew 1 h",
  delete: "Delete",
};

/** How far from now "Renew 1 h" moves an expiry. */
export const renewBy = 3600_000;

/**
 * The expiry "Renew 1 h" would set: an hour from now, or null when that
 * would not move the expiry later (a box that never expires, or one that
 * already outlives the hour). Renew never shortens a box.
 */
export function renewTarget(s: Sandbox, now: Date = new Date()): Date | null {
  if (!s.expiresAt) return null;
  const at = new Date(now.getTime() + renewBy);
  return at.getTime() > new Date(s.expiresAt).getTime() ? at : null;
}

/** The actions a sandbox's state allows; renew only where it lengthens the box's life. */
export function actionsFor(s: Sandbox, now: Date = new Date()): Action[] {
  const renew: Action[] = renewTarget(s, now) ? ["renew"] : [];
  switch (s.status.state) {
    case "Running":
      return ["pause", ...renew, "delete"];
    case "Paused":
      return ["resume", ...renew, "delete"];
    case "Terminated":
      return [];
    default:
      return ["delete"];
  }
}

/**
 * Runs an action; renew moves the expiry to an hour from now, and refuses
 * (without asking the server) when that would not be later than it is.
 */
export function runAction(client: Client, s: Sandbox, a: Action, now: Date = new Date()): Promise<unknown> {
  switch (a) {
    case "pause":
      return client.pauseSandbox(s.id);
    case "resume":
      return client.resumeSandbox(s.id);
    case "renew": {
      const at = renewTarget(s, now);
      if (!at) {
        return Promise.reject(
          new Error(s.expiresAt ? "This sandbox already expires more than an hour from now." : "This sandbox never expires."),
        );
      }
      return client.renewSandbox(s.id, at);
    }
    case "delete":
      return client.deleteSandbox(s.id);
  }
}
