// useSandboxes is the live list of sandboxes: loaded, reloaded every few
// seconds (new boxes, expiry), and kept current between reloads by each
// box's state event stream.
import { useCallback, useEffect, useMemo, useState } from "react";
import type { Client } from "../api/client";
import type { Sandbox, StateEvent } from "../api/types";
import { useAsync } from "../ui/useAsync";
import { EventFollowers } from "./events";

const reloadEvery = 10_000;

export function useSandboxes(client: Client) {
  const list = useAsync(() => client.listSandboxes(), [client]);
  const [events, setEvents] = useState<Record<string, StateEvent>>({});
  const onEvent = useCallback((e: StateEvent) => setEvents((m) => ({ ...m, [e.sandboxId]: e })), []);
  const followers = useMemo(() => new EventFollowers(client, onEvent), [client, onEvent]);
  useEffect(() => () => followers.close(), [followers]);

  const { reload } = list;
  useEffect(() => {
    const t = setInterval(() => void reload(), reloadEvery);
    return () => clearInterval(t);
  }, [reload]);

  const items = useMemo(() => merge(list.data?.items ?? [], events), [list.data, events]);
  const ids = items.map((s) => s.id).join(",");
  useEffect(() => followers.sync(ids ? ids.split(",") : []), [followers, ids]);
  return { ...list, items };
}

/** The listed sandboxes with states newer than the list's from events. */
export function merge(items: Sandbox[], events: Record<string, StateEvent>): Sandbox[] {
  return items.map((s) => {
    const e = events[s.id];
    if (!e || new Date(e.at) < new Date(s.status.lastTransitionAt)) return s;
    return { ...s, status: { ...s.status, state: e.state, reason: e.reason, lastTransitionAt: e.at } };
  });
}
