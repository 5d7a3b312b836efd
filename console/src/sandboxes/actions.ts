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

/** The actions a sandbox's state allows. */
export function actionsFor(s: Sandbox): Action[] {
  switch (s.status.state) {
    case "Running":
      return ["pause", "renew", "delete"];
    case "Paused":
      return ["resume", "renew", "delete"];
    case "Terminated":
      return [];
    default:
      return ["delete"];
  }
}

/** Runs an action; renew extends the expiry to an hour from now. */
export function runAction(client: Client, s: Sandbox, a: Action): Promise<unknown> {
  switch (a) {
    case "pause":
      return client.pauseSandbox(s.id);
    case "resume":
      return client.resumeSandbox(s.id);
    case "renew":
      return client.renewSandbox(s.id, new Date(Date.now() + 3600_000));
    case "delete":
      return client.deleteSandbox(s.id);
  }
}
