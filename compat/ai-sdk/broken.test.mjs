// Reads, with the Vercel AI SDK's own parser (parseJsonEventStream with
// uiMessageChunkSchema into readUIMessageStream), a reply whose model
// stream broke when its server stopped mid-answer: brokenreply_test.go
// stops the server, waits for the reply to end under the restarted one,
// and runs this file to read the reply whole from the new address. What
// the SDK folded goes to BROKEN_RESULTS_FILE.
//
//   ASTRABOX_URL, ASTRABOX_API_HEADER, ASTRABOX_API_KEY  the restarted server
//   SESSION_ID, AFTER_SEQ       the session and a seq inside the reply

import { after, test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import { parseJsonEventStream, readUIMessageStream, uiMessageChunkSchema } from "ai";

const env = (name) => {
  const v = process.env[name];
  assert.ok(v, `${name} must be set (brokenreply_test.go sets it)`);
  return v;
};

const results = { errors: [] };
after(() => writeFileSync(env("BROKEN_RESULTS_FILE"), JSON.stringify(results, null, 2)));

test("a reply whose model stream broke folds into one message", { timeout: 60_000 }, async () => {
  const url = `${env("ASTRABOX_URL")}/api/v1/sessions/${encodeURIComponent(env("SESSION_ID"))}/ai-stream?after_seq=${env("AFTER_SEQ")}`;
  const res = await fetch(url, { headers: { [env("ASTRABOX_API_HEADER")]: env("ASTRABOX_API_KEY") } });
  assert.equal(res.status, 200);
  const chunks = parseJsonEventStream({ stream: res.body, schema: uiMessageChunkSchema }).pipeThrough(
    new TransformStream({
      transform(result, controller) {
        if (!result.success) {
          results.errors.push(`parseJsonEventStream rejected a chunk: ${result.error}`);
          throw result.error;
        }
        controller.enqueue(result.value);
      },
    }),
  );
  for await (const m of readUIMessageStream({ stream: chunks, terminateOnError: true, onError: (e) => results.errors.push(String(e)) })) {
    results.message = m;
  }
  assert.deepEqual(results.errors, []);
  assert.ok(results.message, "no message was folded");
});
