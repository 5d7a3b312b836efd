// The caller's API keys.
import { useMemo } from "react";
import { useCan, useClient, useMe, useVia } from "../auth";
import { keyScopes } from "../permissions";
import { KeysPanel, type KeyCalls } from "./KeysPanel";

export function KeysPage() {
  const client = useClient();
  const me = useMe();
  const via = useVia();
  const canWrite = useCan("write");
  const calls = useMemo<KeyCalls>(
    () => ({ list: client.apiKeys, create: client.createAPIKey, revoke: client.revokeAPIKey }),
    [client],
  );
  return (
    <div className="page">
      <div className="page-head">
        <h1>API keys</h1>
      </div>
      <p className="muted">
        A key lets a program (the <code>astrabox</code> CLI, an SDK, a CI job) act as you, with the scopes you give it.
        {!canWrite && " Your role reads only: an administrator makes keys for you."}
        {via === "key" && !me.key_id && " You are signed in with the server's own key; these are its user's keys."}
      </p>
      <KeysPanel calls={calls} owner="you" scopes={keyScopes(me)} canWrite={canWrite} deps={[client]} />
    </div>
  );
}
