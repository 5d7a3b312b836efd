// SessionTransport is the AI SDK ChatTransport of one AstraBox Session:
// useChat's messages go in as turn inputs (POST /turn-inputs, idempotent
// by the message id), and replies come back from the Session's ai-stream,
// parsed by the SDK's own UI message stream parser.
import {
  isTextUIPart,
  parseJsonEventStream,
  uiMessageChunkSchema,
  type ChatTransport,
  type UIMessage,
  type UIMessageChunk,
} from "ai";
import type { Client } from "../api/client";

export class SessionTransport implements ChatTransport<UIMessage> {
  /** A resumed stream replays the reply from its start frame. */
  readonly resumeStreamIsReplay = true;
  private readonly closed = new AbortController();

  /**
   * @param lastSeq the Session's log position the messages were read at:
   *   a resume continues from it.
   */
  constructor(
    private readonly client: Client,
    private readonly sessionId: string,
    private readonly lastSeq: number,
  ) {}

  /** Ends every stream this transport opened (the view is gone). */
  close(): void {
    this.closed.abort();
  }

  async sendMessages({
    messages,
    abortSignal,
  }: Parameters<ChatTransport<UIMessage>["sendMessages"]>[0]): Promise<ReadableStream<UIMessageChunk>> {
    const last = messages[messages.length - 1];
    if (!last || last.role !== "user") throw new Error("the last message is not the user's");
    const text = last.parts
      .filter(isTextUIPart)
      .map((p) => p.text)
      .join("");
    const rc = await this.client.sendInput(this.sessionId, text, last.id);
    return toStream(this.replyTo(rc.seq, rc.turn_id, abortSignal));
  }

  async reconnectToStream(): Promise<ReadableStream<UIMessageChunk> | null> {
    const resp = await this.open({ after_seq: this.lastSeq });
    if (resp.status === 204 || !resp.body) return null;
    return toStream(frames(resp.body, () => true));
  }

  /**
   * The reply of turn turnId, whose input was accepted at seq: the first
   * reply after it, unless another was still running (a queued input), in
   * which case that one is skipped.
   */
  private async *replyTo(seq: number, turnId: string, signal?: AbortSignal): AsyncGenerator<UIMessageChunk> {
    let after = seq;
    for (;;) {
      const resp = await this.open({ after_seq: after, follow: "session" }, signal);
      if (!resp.body) throw new Error("the reply stream has no body");
      let mine = false;
      let end: number | undefined;
      for await (const chunk of frames(resp.body, (turn) => (mine = turn === turnId), (frameSeq) => (end = frameSeq))) {
        yield chunk;
      }
      if (mine || end === undefined) return;
      after = end;
    }
  }

  private async open(query: Record<string, string | number>, signal?: AbortSignal): Promise<Response> {
    const signals = [this.closed.signal, ...(signal ? [signal] : [])];
    return this.client.raw(
      `/api/v1/sessions/${this.sessionId}/ai-stream`,
      { signal: AbortSignal.any(signals), headers: { Accept: "text/event-stream" } },
      query,
    );
  }
}

/**
 * The UI chunks of an ai-stream body. The reply's data-turn-accepted frame
 * (before its start) is handed to accept and dropped: a chunk before start
 * would open a message of its own. While accept returns false, chunks are
 * dropped too. The transient end cursor goes to onEnd.
 */
async function* frames(
  body: ReadableStream<Uint8Array>,
  accept: (turnId: string) => boolean,
  onEnd?: (frameSeq: number) => void,
): AsyncGenerator<UIMessageChunk> {
  let pass = true;
  const reader = parseJsonEventStream({ stream: body, schema: uiMessageChunkSchema }).getReader();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (!value.success) throw value.error;
      const chunk = value.value;
      if (chunk.type === "data-turn-accepted") {
        pass = accept(String((chunk.data as { turnId?: string }).turnId ?? ""));
        continue;
      }
      if (chunk.type === "data-resume-cursor") {
        onEnd?.(Number((chunk.data as { frameSeq?: number }).frameSeq));
        continue;
      }
      if (pass) yield chunk;
    }
  } finally {
    reader.releaseLock();
  }
}

function toStream<T>(it: AsyncGenerator<T>): ReadableStream<T> {
  return new ReadableStream<T>({
    async pull(controller) {
      try {
        const { value, done } = await it.next();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (err) {
        controller.error(err);
      }
    },
    async cancel() {
      await it.return(undefined);
    },
  });
}
