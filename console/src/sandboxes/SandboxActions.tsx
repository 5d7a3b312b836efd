// The action buttons of one sandbox, with their pending and error state.
import { useState } from "react";
import { useClient } from "../auth";
import { errorText } from "../api/client";
import type { Sandbox } from "../api/types";
import { actionLabels, actionsFor, runAction, type Action } from "./actions";

interface Props {
  sandbox: Sandbox;
  /** Called after an action succeeded. */
  onDone: (a: Action) => void;
}

export function SandboxActions({ sandbox, onDone }: Props) {
  const client = useClient();
  const [running, setRunning] = useState<Action | null>(null);
  const [error, setError] = useState<string | null>(null);
  const run = async (a: Action) => {
    if (a === "delete" && !window.confirm(`Delete sandbox ${sandbox.id}? Everything in it is lost.`)) return;
    setRunning(a);
    setError(null);
    try {
      await runAction(client, sandbox, a);
      onDone(a);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setRunning(null);
    }
  };
  return (
    <div className="actions" role="group" aria-label={`Actions on ${sandbox.id}`}>
      {actionsFor(sandbox).map((a) => (
        <button key={a} className={a === "delete" ? "danger" : undefined} disabled={running !== null} onClick={() => void run(a)}>
          {running === a ? "…" : actionLabels[a]}
        </button>
      ))}
      {error && (
        <span role="alert" className="error small">
          {error}
        </span>
      )}
    </div>
  );
}
