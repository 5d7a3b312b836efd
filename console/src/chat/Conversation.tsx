// One Session's conversation: its history, the reply streaming through
// useChat (resumed after a reload), approvals, questions and interrupt.
import { useEffect, useMemo, useRef } from "react";
import { useChat } from "@ai-sdk/react";
import type { UIMessage } from "ai";
import { useCan, useClient } from "../auth";
import { errorText } from "../api/client";
import { useAsync } from "../ui/useAsync";
import { Empty, ErrorBanner, Loading } from "../ui/states";
import { shortId } from "../ui/format";
import { href, navigate } from "../router";
import { SessionTransport } from "./transport";
import { MessageView, type Answers } from "./MessageView";
import { Composer } from "./Composer";
import { useSession } from "./useSession";

export function Conversation({ sessionId }: { sessionId: string }) {
  const client = useClient();
  const history = useAsync(() => client.messages(sessionId), [client, sessionId]);
  if (history.error) return <ErrorBanner error={history.error} onRetry={history.reload} />;
  if (!history.data) return <Loading label="Loading the conversation…" />;
  return <ChatView key={sessionId} sessionId={sessionId} messages={history.data.messages} lastSeq={history.data.last_seq} />;
}

interface ChatViewProps {
  sessionId: string;
  messages: UIMessage[];
  lastSeq: number;
}

function ChatView({ sessionId, messages: initial, lastSeq }: ChatViewProps) {
  const client = useClient();
  const write = useCan("write");
  const transport = useMemo(() => new SessionTransport(client, sessionId, lastSeq), [client, sessionId, lastSeq]);
  useEffect(() => () => transport.close(), [transport]);
  const { messages, sendMessage, status, error, clearError } = useChat({
    id: sessionId,
    messages: initial,
    transport,
    resume: true,
  });
  const { session, error: sessionError, refresh } = useSession(client, sessionId);
  useEffect(refresh, [status, refresh]);

  const streaming = status === "submitted" || status === "streaming";
  const busy = streaming || session?.state === "BUSY" || session?.state === "INTERRUPTING";
  const answers = useMemo<Answers>(
    () => ({
      decide: async (id, decision) => {
        await client.respond(sessionId, id, { decision });
        refresh();
      },
      answer: async (id, list) => {
        await client.respond(sessionId, id, { answers: list });
        refresh();
      },
      pending: session?.pending_interaction ?? null,
    }),
    [client, sessionId, refresh, session?.pending_interaction],
  );

  const remove = async (agentId: string) => {
    if (!window.confirm("Delete this session? Its sandbox is released and its history is gone.")) return;
    try {
      await client.deleteSession(sessionId);
      navigate("chat", agentId);
    } catch (err) {
      window.alert(errorText(err));
    }
  };

  const end = useRef<HTMLDivElement>(null);
  const last = messages[messages.length - 1];
  useEffect(() => {
    end.current?.scrollIntoView({ block: "end" });
  }, [messages.length, last?.parts.length]);

  return (
    <section className="conversation" aria-label="Conversation">
      <header className="conversation-head">
        <h2>{session?.title || "New session"}</h2>
        <span className={`badge session-${session?.state ?? "unknown"}`} data-testid="session-state" aria-live="polite">
          {session?.state ?? "…"}
        </span>
        {session?.sandbox_id && (
          <a className="muted small" href={href("sandboxes", session.sandbox_id)}>
            sandbox {shortId(session.sandbox_id)}
          </a>
        )}
        {session && write && (
          <button className="danger push-right" onClick={() => void remove(session.agent_id)}>
            Delete session
          </button>
        )}
      </header>
      {sessionError !== undefined && <ErrorBanner error={sessionError} onRetry={refresh} />}
      <div className="messages" aria-live="polite" aria-busy={streaming}>
        {messages.length === 0 && <Empty title="No messages yet">Ask the agent something to start.</Empty>}
        {messages.map((m) => (
          <MessageView key={m.id} message={m} answers={answers} />
        ))}
        {status === "submitted" && <Loading label="Waiting for the agent…" />}
        <div ref={end} />
      </div>
      {error && (
        <div className="banner error" role="alert">
          <span>{errorText(error)}</span>
          <button onClick={clearError}>Dismiss</button>
        </div>
      )}
      {write ? (
        <Composer
          busy={busy}
          disabled={session?.state === "DELETED"}
          onSend={(text) => {
            clearError(); // an earlier failure is not this message's
            void sendMessage({ text });
          }}
          onInterrupt={() => void client.interrupt(sessionId).then(refresh, refresh)}
        />
      ) : (
        <p className="composer muted small">Your role reads only: you can follow this conversation, not write in it.</p>
      )}
    </section>
  );
}
