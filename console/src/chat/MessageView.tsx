// One chat message: Markdown text, collapsed reasoning, tool calls,
// questions and a failed reply's error.
import { memo, useState, type FormEvent, type ReactNode } from "react";
import Markdown from "react-markdown";
import remarkGfm from "remark-gfm";
import { isReasoningUIPart, isTextUIPart, isToolOrDynamicToolUIPart, type UIMessage } from "ai";
import type { Interaction } from "../api/types";
import { errorText } from "../api/client";
import { ToolPart } from "./ToolPart";

export interface Answers {
  /** Answers an approval (a tool call's approval id is its interaction id). */
  decide: (interactionId: string, decision: "approve" | "reject") => Promise<void>;
  /** Answers a question. */
  answer: (interactionId: string, answers: string[]) => Promise<void>;
  /** The interaction the Session waits on, if any. */
  pending: Interaction | null;
}

interface Props {
  message: UIMessage;
  answers: Answers;
}

export const MessageView = memo(function MessageView({ message, answers }: Props) {
  const who = message.role === "user" ? "You" : "Agent";
  return (
    <article className={`message message-${message.role}`} aria-label={`${who} said`} data-testid={`message-${message.role}`}>
      <div className="message-who" aria-hidden="true">
        {who}
      </div>
      <div className="message-body">
        {message.parts.map((part, i) => {
          const key = `${message.id}-${i}`;
          if (isTextUIPart(part)) {
            return message.role === "user" ? (
              <p key={key} className="user-text">
                {part.text}
              </p>
            ) : (
              <div key={key} className="markdown">
                <Markdown remarkPlugins={[remarkGfm]} components={{ a: ExternalLink }}>
                  {part.text}
                </Markdown>
              </div>
            );
          }
          if (isReasoningUIPart(part)) {
            return (
              <details key={key} className="reasoning">
                <summary>{part.state === "streaming" ? "Thinking…" : "Reasoning"}</summary>
                <p>{part.text}</p>
              </details>
            );
          }
          if (isToolOrDynamicToolUIPart(part)) {
            return <ToolPart key={key} part={part} onDecide={answers.decide} />;
          }
          if (part.type === "data-interaction") {
            const ia = (part as { data: Interaction }).data;
            if (ia.kind !== "question" || answers.pending?.interaction_id !== ia.interaction_id) return null;
            return <QuestionForm key={key} interaction={ia} onAnswer={answers.answer} />;
          }
          if (part.type === "data-step-broken") {
            // The way to the model broke off: what came before is replaced
            // by the answer that follows.
            return (
              <p key={key} className="notice muted small" role="status" data-testid="step-broken">
                The connection to the model broke off; the answer starts again below.
              </p>
            );
          }
          if (part.type === "data-turn-interrupted") {
            return (
              <p key={key} className="notice muted small" role="status" data-testid="reply-stopped">
                Stopped: the reply was interrupted here.
              </p>
            );
          }
          if (part.type === "data-turn-failure") {
            const f = (part as { data: { code?: string; message?: string } }).data;
            return (
              <p key={key} className="banner error" role="alert">
                The reply failed: {f.message || "unknown error"} {f.code && <code>{f.code}</code>}
              </p>
            );
          }
          return null;
        })}
      </div>
    </article>
  );
});

function ExternalLink({ href, children }: { href?: string; children?: ReactNode }) {
  return (
    <a href={href} target="_blank" rel="noopener noreferrer">
      {children}
    </a>
  );
}

function QuestionForm({ interaction, onAnswer }: { interaction: Interaction; onAnswer: Answers["answer"] }) {
  const questions = interaction.questions?.length ? interaction.questions : ["Your answer"];
  const [values, setValues] = useState(() => questions.map(() => ""));
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    setBusy(true);
    setError(null);
    try {
      await onAnswer(interaction.interaction_id, values);
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  return (
    <form className="question card" onSubmit={submit} aria-label="The agent asks">
      {questions.map((q, i) => (
        <label key={i}>
          {q}
          <input
            value={values[i]}
            required
            onChange={(e) => setValues(values.map((v, j) => (j === i ? e.target.value : v)))}
          />
        </label>
      ))}
      {error && (
        <p role="alert" className="error">
          {error}
        </p>
      )}
      <button type="submit" className="primary" disabled={busy}>
        {busy ? "Sending…" : "Answer"}
      </button>
    </form>
  );
}
