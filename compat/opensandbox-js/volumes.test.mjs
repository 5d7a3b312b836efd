// Volumes through the official OpenSandbox JavaScript SDK: Sandbox.create
// with `pvc` and `host` volumes, as OpenSandbox documents them.
// volumes_test.go serves AstraBox with volumes.hostPathRoots = [HOST_ROOT]
// and runs this file; HOST_ROOT/shared holds "from-host".

import { test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

import { ConnectionConfig, Sandbox, SandboxApiException } from "@alibaba-group/opensandbox";

const IMAGE = process.env.SANDBOX_IMAGE || "host";
const EXTENSIONS = JSON.parse(process.env.SANDBOX_EXTENSIONS || "{}");
const HOST_ROOT = process.env.HOST_ROOT;
assert.ok(HOST_ROOT, "HOST_ROOT must name the allowed host path root");
const CLAIM = "js-" + randomUUID().slice(0, 8);
const config = new ConnectionConfig({ requestTimeoutSeconds: 60 });

async function create(volumes) {
  return Sandbox.create({
    connectionConfig: config,
    image: IMAGE,
    extensions: EXTENSIONS,
    entrypoint: ["sleep", "infinity"],
    timeoutSeconds: 600,
    volumes,
  });
}

async function sh(sandbox, cmd) {
  const r = await sandbox.commands.run(cmd);
  return { code: r.exitCode, out: r.logs.stdout.map((m) => m.text) };
}

test("a pvc volume keeps files across sandboxes; a host volume shows the host's", async () => {
  const first = await create([
    { name: "work", pvc: { claimName: CLAIM }, mountPath: "/mnt/work" },
    { name: "host", host: { path: `${HOST_ROOT}/shared` }, mountPath: "/mnt/host", readOnly: true },
  ]);
  try {
    assert.deepEqual(await sh(first, "mkdir -p /mnt/work/sub && echo kept > /mnt/work/sub/file && chown 1000:1000 /mnt/work/sub/file && echo ok"),
      { code: 0, out: ["ok"] });
    assert.deepEqual(await sh(first, "cat /mnt/host/from-host"), { code: 0, out: ["host"] });
    assert.notEqual((await sh(first, "touch /mnt/host/new")).code, 0, "a readOnly host volume is read-only");
  } finally {
    await first.kill();
    await first.close();
  }
  const second = await create([{ name: "again", pvc: { claimName: CLAIM }, mountPath: "/data", subPath: "sub" }]);
  try {
    assert.deepEqual(await sh(second, "cat /data/file; stat -c %u:%g /data/file"), { code: 0, out: ["kept", "1000:1000"] });
  } finally {
    await second.kill();
    await second.close();
  }
});

test("host paths outside the allowed roots and subPaths with '..' are refused", async () => {
  for (const [volumes, want] of [
    [[{ name: "etc", host: { path: "/etc" }, mountPath: "/mnt/etc" }], HOST_ROOT],
    [[{ name: "up", pvc: { claimName: CLAIM }, mountPath: "/mnt/up", subPath: "../x" }], ".."],
  ]) {
    await assert.rejects(create(volumes), (err) => {
      assert.ok(err instanceof SandboxApiException, `a SandboxApiException: ${err}`);
      assert.equal(err.statusCode, 400);
      assert.match(JSON.stringify(err.rawBody ?? err.message), new RegExp(want.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
      return true;
    });
  }
});

test("the named volume is listed, then removed", async () => {
  const base = `http://${process.env.OPEN_SANDBOX_DOMAIN}/v1/volumes`;
  const headers = { "OPEN-SANDBOX-API-KEY": process.env.OPEN_SANDBOX_API_KEY };
  const list = await (await fetch(base, { headers })).json();
  assert.ok(list.items.some((v) => v.name === CLAIM), `volume ${CLAIM} listed: ${JSON.stringify(list)}`);
  const del = await fetch(`${base}/${CLAIM}`, { method: "DELETE", headers });
  assert.equal(del.status, 204);
});
