import { describe, expect, it } from "vitest";
import type { UIMessageChunk } from "ai";
import type { Client } from "../api/client";
import { SessionTransport } from "./transport";

/** An ai-stream body: each chunk a data line, then [DONE]. */
function sse(chunks: object[]): string {
  return chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + "data: [DONE]\n\n";
}

const reply = (turnId: string, text: string, finishSeq: number) => [
  { type: "data-turn-accepted", data: { turnId, inputId: "in_" + turnId } },
  { type: "start", messageId: "msg_in_" + turnId },
  { type: "text-start", id: "t" },
  { type: "text-delta", id: "t", delta: text },
  { type: "text-end", id: "t" },
  { type: "finish", finishReason: "stop" },
  { type: "data-resume-cursor", transient: true, data: { frameSeq: finishSeq, turnId } },
];

/** A Client whose ai-stream answers bodies in turn, recording the queries. */
function fakeClient(bodies: (string | null)[]) {
  const queries: Record<string, string | number>[] = [];
  const client = {
    sendInput: async () => ({ input_id: "in_t2", turn_id: "t2", client_message_id: "m", seq: 10, state: "accepted" }),
    raw: async (_path: string, _init: RequestInit, query: Record<string, string | number>) => {
      queries.push(query);
      const body = bodies.shift();
      return body === null ? new Response(null, { status: 204 }) : new Response(body, { headers: { "Content-Type": "text/event-stream" } });
    },
  } as unknown as Client;
  return { client, queries };
}

async function read(s: ReadableStream<UIMessageChunk> | null): Promise<UIMessageChunk[]> {
  const out: UIMessageChunk[] = [];
  if (!s) return out;
  const r = s.getReader();
  for (;;) {
    const { value, done } = await r.read();
    if (done) return out;
    out.push(value);
  }
}

const userMessage = { id: "m", role: "user" as const, parts: [{ type: "text" as const, text: "hi" }] };

describe("SessionTransport", () => {
  it("streams the reply to the input it sent, without the bookkeeping frames", async () => {
    const { client, queries } = fakeClient([sse(reply("t2", "hello", 20))]);
    const t = new SessionTransport(client, "s1", 0);
    const chunks = await read(
      await t.sendMessages({ trigger: "submit-message", chatId: "s1", messageId: undefined, messages: [userMessage], abortSignal: undefined }),
    );
    expect(chunks.map((c) => c.type)).toEqual(["start", "text-start", "text-delta", "text-end", "finish"]);
    expect(queries).toEqual([{ after_seq: 10, follow: "session" }]);
  });

  it("skips a reply still running for an earlier input", async () => {
    const { client, queries } = fakeClient([sse(reply("t1", "earlier", 15)), sse(reply("t2", "mine", 20))]);
    const t = new SessionTransport(client, "s1", 0);
    const chunks = await read(
      await t.sendMessages({ trigger: "submit-message", chatId: "s1", messageId: undefined, messages: [userMessage], abortSignal: undefined }),
    );
    const deltas = chunks.filter((c) => c.type === "text-delta").map((c) => (c as { delta: string }).delta);
    expect(deltas).toEqual(["mine"]);
    expect(queries).toEqual([
      { after_seq: 10, follow: "session" },
      { after_seq: 15, follow: "session" },
    ]);
  });

  it("resumes from the position the history was read at", async () => {
    const { client, queries } = fakeClient([sse(reply("t1", "again", 9)), null]);
    const t = new SessionTransport(client, "s1", 7);
    expect((await read(await t.reconnectToStream())).map((c) => c.type)).toContain("text-delta");
    expect(queries).toEqual([{ after_seq: 7 }]);
    expect(await t.reconnectToStream()).toBeNull(); // 204: nothing to resume
  });
});
