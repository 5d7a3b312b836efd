// The OpenSandbox JS SDK's network-policy calls against AstraBox: a
// sandbox created with networkPolicy (defaultAction deny, an allow rule),
// its egress policy read and changed at run time through the egress API
// (port 18080 of the sandbox's endpoint) with getEgressPolicy,
// patchEgressRules and deleteEgressRules, and, inside the box, names that
// no rule allows do not resolve and addresses are not reached.
// egress_test.go starts the server; SANDBOX_IMAGE and SANDBOX_EXTENSIONS
// as in sdk.test.mjs.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";

import { ConnectionConfig, Sandbox } from "@alibaba-group/opensandbox";

const IMAGE = process.env.SANDBOX_IMAGE || "host";
const EXTENSIONS = JSON.parse(process.env.SANDBOX_EXTENSIONS || "{}");
const config = new ConnectionConfig({ requestTimeoutSeconds: 60, debug: !!process.env.SDK_DEBUG });

/** The targets of a policy's rules of action, sorted. */
function targets(policy, action) {
  return (policy.egress ?? []).filter((r) => r.action === action).map((r) => r.target).sort();
}

describe("OpenSandbox JS SDK network policy against AstraBox", () => {
  /** @type {Sandbox} */
  let sandbox;

  before(async () => {
    sandbox = await Sandbox.create({
      connectionConfig: config,
      image: IMAGE,
      extensions: EXTENSIONS,
      entrypoint: ["sleep", "infinity"],
      timeoutSeconds: 300,
      metadata: { suite: "opensandbox-js-egress", run: randomUUID() },
      networkPolicy: { defaultAction: "deny", egress: [{ action: "allow", target: "allowed.example" }] },
    });
  });

  after(async () => {
    if (sandbox) {
      try {
        await sandbox.kill();
      } catch {
        // already gone
      }
      await sandbox.close();
    }
  });

  test("the created policy is what the sandbox's egress API answers", async () => {
    const policy = await sandbox.getEgressPolicy();
    assert.equal(policy.defaultAction, "deny");
    assert.deepEqual(targets(policy, "allow"), ["allowed.example"]);
  });

  test("patchEgressRules adds and changes rules at run time", async () => {
    await sandbox.patchEgressRules([
      { action: "allow", target: "*.example.org" },
      { action: "deny", target: "blocked.example" },
    ]);
    const policy = await sandbox.getEgressPolicy();
    assert.deepEqual(targets(policy, "allow"), ["*.example.org", "allowed.example"]);
    assert.deepEqual(targets(policy, "deny"), ["blocked.example"]);
    // The box kept running: the change needs no restart.
    assert.equal((await sandbox.getInfo()).status.state, "Running");
  });

  test("deleteEgressRules removes rules by target", async () => {
    await sandbox.deleteEgressRules(["allowed.example", "blocked.example"]);
    const policy = await sandbox.getEgressPolicy();
    assert.deepEqual(targets(policy, "allow"), ["*.example.org"]);
    assert.deepEqual(targets(policy, "deny"), []);
  });

  test("inside the box, a name no rule allows does not resolve", async () => {
    const run = await sandbox.commands.run("getent hosts denied.example.com; echo exit=$?");
    assert.deepEqual(run.logs.stdout.map((m) => m.text), ["exit=2"]);
  });

  test("inside the box, an address no rule allows is refused by the proxy", async () => {
    // The box's TCP goes to AstraBox's egress proxy, which reads the
    // request, refuses its destination and answers 403 itself.
    const run = await sandbox.commands.run(
      "exec 3<>/dev/tcp/192.0.2.10/80 && printf 'GET / HTTP/1.0\\r\\nHost: 192.0.2.10\\r\\n\\r\\n' >&3; " +
        "timeout 10 head -n 1 <&3 | tr -d '\\r'",
    );
    assert.deepEqual(run.logs.stdout.map((m) => m.text), ["HTTP/1.1 403 Forbidden"]);
  });
});
