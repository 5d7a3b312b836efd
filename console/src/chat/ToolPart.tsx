// One tool call of a reply: its name and state, its input and output, and
// Approve / Reject while it waits on an approval.
import { useState } from "react";
import type { DynamicToolUIPart, ToolUIPart } from "ai";
import { errorText } from "../api/client";

export type AnyToolPart = DynamicToolUIPart | ToolUIPart;

const stateLabels: Record<string, string> = {
  "input-streaming": "preparing",
  "input-available": "running",
  "approval-requested": "waiting for approval",
  "approval-responded": "answered",
  "output-available": "done",
  "output-error": "failed",
  "output-denied": "denied",
};

export function toolName(part: AnyToolPart): string {
  return part.type === "dynamic-tool" ? part.toolName : part.type.replace(/^tool-/, "");
}

/** A short summary of a call's input: its command or path, if it has one. */
function summary(input: unknown): string {
  if (input && typeof input === "object") {
    const o = input as Record<string, unknown>;
    for (const k of ["command", "path", "pattern", "query"]) if (typeof o[k] === "string") return o[k] as string;
  }
  return "";
}

function show(v: unknown): string {
  if (typeof v === "string") return v;
  return JSON.stringify(v, null, 2);
}

/** The text of a tool's output: stdout and stderr of a shell call, or JSON. */
function outputText(output: unknown): string {
  if (output && typeof output === "object") {
    const o = output as Record<string, unknown>;
    if (typeof o.stdout === "string" || typeof o.stderr === "string") {
      const parts = [o.stdout, o.stderr].filter((s) => typeof s === "string" && s !== "") as string[];
      const code = o.exit_code ?? o.exitCode;
      return parts.join("\n") + (code !== undefined && code !== 0 ? `\n[exit ${String(code)}]` : "");
    }
  }
  return show(output);
}

interface Props {
  part: AnyToolPart;
  /** Answers the approval with this id; rejects with the server's error. */
  onDecide: (approvalId: string, decision: "approve" | "reject") => Promise<void>;
}

export function ToolPart({ part, onDecide }: Props) {
  const [deciding, setDeciding] = useState<"approve" | "reject" | null>(null);
  const [error, setError] = useState<string | null>(null);
  const name = toolName(part);
  const label = stateLabels[part.state] ?? part.state;
  const approval = part.state === "approval-requested" ? part.approval : undefined;
  const decide = async (d: "approve" | "reject") => {
    if (!approval) return;
    setDeciding(d);
    setError(null);
    try {
      await onDecide(approval.id, d);
    } catch (err) {
      setError(errorText(err));
      setDeciding(null);
    }
  };
  const failed = part.state === "output-error" || part.state === "output-denied";
  return (
    <details className={`tool tool-${part.state}`} open={!!approval || failed} data-testid="tool-call">
      <summary>
        <span className="tool-name">{name}</span>
        <code className="tool-summary">{summary(part.input)}</code>
        <span className={`badge state-${part.state}`}>{label}</span>
      </summary>
      <div className="tool-body">
        {part.input !== undefined && (
          <section aria-label="Input">
            <h4>Input</h4>
            <pre>{show(part.input)}</pre>
          </section>
        )}
        {part.state === "output-available" && (
          <section aria-label="Output">
            <h4>Output</h4>
            <pre data-testid="tool-output">{outputText(part.output)}</pre>
          </section>
        )}
        {part.state === "output-error" && <p className="error">{part.errorText}</p>}
        {part.state === "output-denied" && <p className="muted">The call was rejected.</p>}
      </div>
      {approval && (
        <div className="approval" role="group" aria-label={`Approve the ${name} call?`}>
          <span>
            Run <strong>{name}</strong>?
          </span>
          <button className="primary" disabled={deciding !== null} onClick={() => void decide("approve")}>
            {deciding === "approve" ? "Approving…" : "Approve"}
          </button>
          <button className="danger" disabled={deciding !== null} onClick={() => void decide("reject")}>
            {deciding === "reject" ? "Rejecting…" : "Reject"}
          </button>
          {error && (
            <span role="alert" className="error">
              {error}
            </span>
          )}
        </div>
      )}
    </details>
  );
}
