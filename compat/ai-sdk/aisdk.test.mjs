// Reads AstraBox's agent stream (GET /api/v1/sessions/{id}/ai-stream) with
// the Vercel AI SDK's own parser: every response body goes through
// parseJsonEventStream({stream, schema: uiMessageChunkSchema}) into
// readUIMessageStream, as DefaultChatTransport and useChat do, and resume
// goes through DefaultChatTransport.reconnectToStream. Each body is also
// teed to a small wire reader that keeps the SSE ids and the order of the
// events, which the parser drops, so that the framing is checked too.
//
// aisdk_test.go starts the server, opens the session and runs this file
// with node --test; the tests run in order on that one session (its first
// reply is live, its second held mid-text by the fake model). The
// environment says where everything is:
//
//   ASTRABOX_URL, ASTRABOX_API_HEADER, ASTRABOX_API_KEY  the server
//   SESSION_ID                  the session
//   LIVE_INPUT, RESUME_INPUT    what to send for the first and second reply
//   RELEASE_URL                 POST here to let the held second reply go on
//   AISDK_RESULTS_FILE          where to write what the tests saw, as JSON

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";

import {
  DefaultChatTransport,
  parseJsonEventStream,
  readUIMessageStream,
  uiMessageChunkSchema,
} from "ai";

/** Returns a required environment variable. */
function env(name) {
  const v = process.env[name];
  assert.ok(v, `${name} must be set (aisdk_test.go sets it)`);
  return v;
}

const BASE = env("ASTRABOX_URL");
const AUTH = { [env("ASTRABOX_API_HEADER")]: env("ASTRABOX_API_KEY") };
const SESSION = env("SESSION_ID");
const TIMEOUT_MS = 120_000;

/** What the tests saw, written to AISDK_RESULTS_FILE for aisdk_test.go. */
const results = { live: {}, replay: {}, liveEnded: {}, resume: {}, resumeEnded: {} };
after(() => writeFileSync(env("AISDK_RESULTS_FILE"), JSON.stringify(results, null, 2)));

/** The session's URL under /api/v1, with a path after it. */
const sessionURL = (path) => `${BASE}/api/v1/sessions/${encodeURIComponent(SESSION)}/${path}`;

/** GETs the session's ai-stream with query parameters. */
function getAIStream(query) {
  return fetch(`${sessionURL("ai-stream")}?${new URLSearchParams(query)}`, { headers: AUTH, signal: AbortSignal.timeout(TIMEOUT_MS) });
}

/** Sends a turn input; returns the receipt. */
async function sendInput(content) {
  const res = await fetch(sessionURL("turn-inputs"), {
    method: "POST",
    headers: { ...AUTH, "content-type": "application/json" },
    body: JSON.stringify({ content }),
  });
  const body = await res.text();
  assert.equal(res.status, 201, `POST turn-inputs: ${res.status} ${body}`);
  return JSON.parse(body);
}

/**
 * The client's resume cursor per chat (the chat id is the session id),
 * which prepareReconnectToStreamRequest turns into after_seq.
 */
const cursors = new Map();

/** A transport configured as a useChat({resume: true}) client would be. */
const transport = new DefaultChatTransport({
  api: `${BASE}/api/v1/sessions`,
  headers: AUTH,
  prepareReconnectToStreamRequest: ({ id, api }) => ({
    api: `${api}/${encodeURIComponent(id)}/ai-stream?${new URLSearchParams({ after_seq: String(cursors.get(id)) })}`,
  }),
});

/** Describes an error the SDK raised, with what it says about the chunk. */
function explain(err) {
  if (!(err instanceof Error)) return String(err);
  let s = `${err.name}: ${err.message}`;
  if (err.cause) s += ` (cause: ${err.cause?.message ?? err.cause})`;
  return s;
}

/**
 * Folds a stream of UI message chunks with readUIMessageStream into
 * state: the snapshots, the last one as state.message, and the SDK's
 * errors. state.done settles when the stream ends.
 */
function fold(chunks, state) {
  state.snapshots = [];
  state.message = undefined;
  state.errors ??= [];
  state.done = (async () => {
    try {
      const messages = readUIMessageStream({
        stream: chunks,
        terminateOnError: true,
        onError: (err) => state.errors.push(explain(err)),
      });
      for await (const m of messages) {
        state.snapshots.push(m);
        state.message = m;
      }
    } catch (err) {
      state.errors.push(`readUIMessageStream threw: ${explain(err)}`);
    }
  })();
  return state;
}

/**
 * Reads an SSE body as the events that crossed the wire, {id, data}: id is
 * "" for an event without an id line, data is parsed when it is JSON.
 * Comments (keepalives) are skipped. Each event is pushed to events; when
 * stop(event) is true the body is cancelled and reading ends.
 */
async function readWire(body, events, stop = () => false) {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf = (buf + value).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let id = "";
      const data = [];
      for (const line of block.split("\n")) {
        if (line === "" || line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const v = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "id") id = v;
        if (field === "data") data.push(v);
      }
      if (data.length === 0) continue;
      const raw = data.join("\n");
      let parsed = raw;
      try {
        parsed = JSON.parse(raw);
      } catch {
        // [DONE] is the one event that is not JSON.
      }
      const ev = { id, data: parsed };
      events.push(ev);
      if (stop(ev)) {
        await reader.cancel();
        return;
      }
    }
  }
  assert.equal(buf.trim(), "", "the stream ended inside an event");
}

/**
 * Reads an ai-stream response the way DefaultChatTransport does:
 * parseJsonEventStream with uiMessageChunkSchema, a failed parse thrown,
 * into readUIMessageStream. Returns the fold state plus every chunk the
 * parser produced (state.chunks) and the wire events (state.wire).
 */
function readResponse(res) {
  const [forSDK, forWire] = res.body.tee();
  const state = { chunks: [], wire: [], errors: [] };
  const chunks = parseJsonEventStream({ stream: forSDK, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          state.errors.push(`parseJsonEventStream rejected a chunk: ${explain(result.error)}`);
          throw result.error;
        }
        state.chunks.push(result.value);
        controller.enqueue(result.value);
      },
    }),
  );
  fold(chunks, state);
  state.done = Promise.all([state.done, readWire(forWire, state.wire)]);
  return state;
}

/** Polls until cond() is true. */
async function waitFor(what, cond, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Awaits p, failing after ms. */
async function within(ms, what, p) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms: ${what}`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** The text of a message's text parts. */
const textOf = (m) => (m?.parts ?? []).filter((p) => p.type === "text").map((p) => p.text).join("");

/** The response headers the protocol names, for the results. */
function headersOf(res) {
  const h = {};
  for (const name of ["content-type", "cache-control", "x-vercel-ai-ui-message-stream"]) {
    h[name] = res.headers.get(name) ?? "";
  }
  return h;
}

/** Asserts the UI message stream's status and headers. */
function assertHeaders(res) {
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /^text\/event-stream/);
  assert.equal(res.headers.get("x-vercel-ai-ui-message-stream"), "v1");
  assert.equal(res.headers.get("cache-control"), "no-cache");
}

/**
 * Asserts how a reply ends on the wire: finish (with its seq as id), the
 * transient data-resume-cursor {frameSeq: that seq, turnId} without an id,
 * then [DONE], and nothing after (the server closed the stream). The
 * cursor went through the parser but is no part of the message. Returns
 * the last three events.
 */
function assertEnding(state, turnId) {
  const tail = state.wire.slice(-3);
  assert.equal(tail.length, 3, "at least finish, cursor and [DONE]");
  const [finish, cursor, done] = tail;
  assert.equal(finish.data.type, "finish");
  assert.match(finish.id, /^\d+$/, "the finish frame carries its seq");
  assert.deepEqual(cursor, {
    id: "",
    data: { type: "data-resume-cursor", transient: true, data: { frameSeq: Number(finish.id), turnId } },
  });
  assert.deepEqual(done, { id: "", data: "[DONE]" });
  assert.equal(state.chunks.at(-1)?.type, "data-resume-cursor", "the parser passed the cursor on");
  assert.ok(!state.message.parts.some((p) => p.type === "data-resume-cursor"), "a transient chunk is no part of the message");
  // Every frame before the cursor has an id, and the ids rise.
  const ids = state.wire.slice(0, -2).map((e) => Number(e.id));
  assert.ok(ids.every((id, i) => id > 0 && (i === 0 || id > ids[i - 1])), `frame ids ${ids}`);
  return tail;
}

/** Returns a message's one tool part, asserting it is a dynamic tool. */
function onlyTool(m) {
  const tools = m.parts.filter((p) => p.type === "dynamic-tool" || p.type.startsWith("tool-"));
  assert.equal(tools.length, 1, `one tool part: ${JSON.stringify(m.parts)}`);
  assert.equal(tools[0].type, "dynamic-tool");
  return tools[0];
}

/**
 * Asserts that after_seq at a reply's end answers 204 with no body, to a
 * plain fetch and to reconnectToStream (null); records both in r.
 */
async function assertNothingToResume(afterSeq, r) {
  r.afterSeq = afterSeq;
  const res = await getAIStream({ after_seq: String(afterSeq) });
  const body = await res.text();
  r.status = res.status;
  r.bodyLength = body.length;
  assert.equal(res.status, 204, `after_seq=${afterSeq}: ${res.status} ${body}`);
  assert.equal(body, "");
  cursors.set(SESSION, afterSeq);
  const stream = await transport.reconnectToStream({ chatId: SESSION });
  r.transportNull = stream === null;
  assert.equal(stream, null);
}

/** The first reply's stream, read live in the first test. */
let live;

test("a live reply with a tool call, read with follow=session as it streams", { timeout: TIMEOUT_MS }, async () => {
  // Connect first: the reply is the next one, read while it is produced.
  const res = await getAIStream({ follow: "session" });
  assertHeaders(res);
  live = readResponse(res);
  const rc = await sendInput(env("LIVE_INPUT"));
  await within(TIMEOUT_MS, "the live reply", live.done);

  const r = results.live;
  r.inputId = rc.input_id;
  r.turnId = rc.turn_id;
  r.errors = live.errors;
  r.headers = headersOf(res);
  r.snapshots = live.snapshots.length;
  r.message = live.message;
  assert.deepEqual(live.errors, []);

  const start = live.chunks.find((c) => c.type === "start");
  r.startMessageId = start?.messageId;
  assert.deepEqual(live.chunks.slice(0, 2).map((c) => c.type), ["data-turn-accepted", "start"]);
  assert.ok(start.messageId, "start has a messageId");
  assert.equal(live.message.id, start.messageId);
  assert.equal(live.message.role, "assistant");
  assert.deepEqual(live.message.metadata, { turn_id: rc.turn_id, input_id: rc.input_id });

  const tool = onlyTool(live.message);
  assert.equal(tool.toolName, "shell");
  assert.equal(tool.state, "output-available");
  assert.equal(typeof tool.input?.command, "string");
  assert.match(JSON.stringify(tool.output), /live-tool-output/);
  assert.ok(textOf(live.message).length > 0, "the message has text");
  assert.ok(live.message.parts.every((p) => p.type !== "text" || p.state === "done"), "text parts are done");

  // The SDK folded the reply step by step: the tool's input before its
  // output, the text while it was streaming.
  r.sawInputOnly = live.snapshots.some((m) => m.parts.some((p) => p.type === "dynamic-tool" && p.state === "input-available"));
  r.sawTextStreaming = live.snapshots.some((m) => m.parts.some((p) => p.type === "text" && p.state === "streaming"));
  assert.ok(r.sawInputOnly, "a snapshot has the tool's input without its output");
  assert.ok(r.sawTextStreaming, "a snapshot has the text still streaming");

  r.tail = assertEnding(live, rc.turn_id);
});

test("a cursor inside an ended reply replays it whole, ending with the resume cursor and [DONE]", { timeout: TIMEOUT_MS }, async () => {
  assert.ok(live?.message, "the live reply was read");
  const delta = live.wire.find((e) => e.data?.type === "text-delta");
  const r = results.replay;
  r.afterSeq = Number(delta.id);
  const res = await getAIStream({ after_seq: delta.id });
  assertHeaders(res);
  const state = readResponse(res);
  await within(TIMEOUT_MS, "the replayed reply (the server closes it after [DONE])", state.done);
  r.headers = headersOf(res);
  r.message = state.message;
  r.errors = state.errors;
  r.firstTypes = state.chunks.slice(0, 2).map((c) => c.type);
  assert.deepEqual(state.errors, []);
  assert.deepEqual(r.firstTypes, ["data-turn-accepted", "start"]);
  assert.deepEqual(state.wire.map((e) => e.id), live.wire.map((e) => e.id), "the same frames as the live stream");
  assert.deepEqual(state.message, live.message, "the same message as the live stream");
  r.tail = assertEnding(state, results.live.turnId);
});

test("after_seq at the end of the last reply answers 204; reconnectToStream returns null", { timeout: TIMEOUT_MS }, async () => {
  const finish = results.live.tail?.[1]?.data?.data?.frameSeq;
  assert.ok(finish > 0, "the live reply's resume cursor");
  await assertNothingToResume(finish, results.liveEnded);
});

test("resuming inside a reply restarts it from its start, then follows it to the end", { timeout: TIMEOUT_MS }, async () => {
  const r = results.resume;
  const rc = await sendInput(env("RESUME_INPUT"));
  r.inputId = rc.input_id;
  r.turnId = rc.turn_id;

  // The fake model holds this reply after its first text delta: find its
  // first frame and that delta on the raw log.
  const events = [];
  const logRes = await fetch(`${sessionURL("events")}?after_seq=${rc.seq}`, { headers: AUTH, signal: AbortSignal.timeout(TIMEOUT_MS) });
  assert.equal(logRes.status, 200);
  await readWire(logRes.body, events, (e) => e.data.type === "text-delta" && e.data.turn_id === rc.turn_id);
  const first = events.find((e) => e.data.turn_id === rc.turn_id && !e.data.type.includes("."));
  const held = events.at(-1);
  assert.equal(first.data.type, "data-turn-accepted");
  assert.equal(held.data.type, "text-delta");
  r.startSeq = first.data.seq;
  r.afterSeq = held.data.seq;
  const heldText = held.data.payload.delta;

  // The parser on a plain fetch, and DefaultChatTransport.reconnectToStream
  // with the same cursor, both while the reply is held.
  const res = await getAIStream({ after_seq: String(r.afterSeq) });
  assertHeaders(res);
  r.headers = headersOf(res);
  const state = readResponse(res);
  cursors.set(SESSION, r.afterSeq);
  const resumed = await transport.reconnectToStream({ chatId: SESSION, abortSignal: AbortSignal.timeout(TIMEOUT_MS) });
  assert.ok(resumed, "reconnectToStream returns a stream for a cursor inside a reply");
  const viaTransport = fold(resumed, { errors: [] });

  await waitFor(
    "both readers to reach the held text",
    () => textOf(state.message) === heldText && textOf(viaTransport.message) === heldText && state.wire.some((e) => e.id === String(r.afterSeq)),
  ).catch((err) => {
    throw new Error(
      `${err.message}; parser errors ${JSON.stringify(state.errors)}, transport errors ${JSON.stringify(viaTransport.errors)}, ` +
        `wire ${JSON.stringify(state.wire.map((e) => `${e.id}:${e.data?.type}`))}`,
    );
  });
  r.firstId = state.wire[0].id;
  r.firstTypes = state.chunks.slice(0, 2).map((c) => c.type);
  r.heldText = textOf(state.message);
  r.startMetadata = state.chunks[1]?.messageMetadata;
  assert.equal(r.firstId, String(r.startSeq), "the resumed stream opens with the reply's first frame");
  assert.deepEqual(r.firstTypes, ["data-turn-accepted", "start"]);
  assert.deepEqual(state.errors, []);
  assert.deepEqual(viaTransport.errors, []);
  assert.equal(onlyTool(state.message).state, "output-available", "the tool call before the hold is replayed whole");
  assert.equal(state.wire.at(-1).data.type, "text-delta", "nothing past the held delta yet");

  const rel = await fetch(env("RELEASE_URL"), { method: "POST" });
  assert.equal(rel.status, 204);
  await within(TIMEOUT_MS, "the resumed reply's end", Promise.all([state.done, viaTransport.done]));

  r.errors = [...state.errors, ...viaTransport.errors.map((e) => `transport: ${e}`)];
  r.message = state.message;
  r.transportMessage = viaTransport.message;
  assert.deepEqual(r.errors, []);
  assert.equal(state.message.id, state.chunks[1].messageId);
  assert.deepEqual(state.message.metadata, { turn_id: rc.turn_id, input_id: rc.input_id });
  assert.ok(textOf(state.message).startsWith(heldText) && textOf(state.message).length > heldText.length, "the text went on after the hold");
  assert.deepEqual(viaTransport.message, state.message, "the transport folds the same message");
  r.tail = assertEnding(state, rc.turn_id);
});

test("the resumed reply's cursor answers 204; reconnectToStream returns null", { timeout: TIMEOUT_MS }, async () => {
  const finish = results.resume.tail?.[1]?.data?.data?.frameSeq;
  assert.ok(finish > 0, "the resumed reply's resume cursor");
  await assertNothingToResume(finish, results.resumeEnded);
});
