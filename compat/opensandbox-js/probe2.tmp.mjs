import { Sandbox } from "@alibaba-group/opensandbox";
const sb = await Sandbox.create({ image: "host", entrypoint: ["sleep","infinity"], resource: { cpu: "500m", memory: "512Mi" } });
const step = async (name, fn) => { try { const v = await fn(); console.log("OK  ", name, JSON.stringify(v)?.slice(0, 300)); } catch (e) { console.log("FAIL", name, e.statusCode ?? "", e.error?.code ?? "", e.message); } };
try {
  await step("signed endpoint", () => sb.getSignedEndpoint(8000, Math.floor(Date.now()/1000) + 3600));
  await step("session", async () => { const id = await sb.commands.createSession({ workingDirectory: "/tmp" }); const a = await sb.commands.runInSession(id, "export X=1; cd /usr; pwd"); const b = await sb.commands.runInSession(id, "echo $X; pwd"); await sb.commands.deleteSession(id); return [a.logs.stdout, b.logs.stdout, a.exitCode, b.exitCode]; });
  await step("session exit code", async () => { const id = await sb.commands.createSession(); const a = await sb.commands.runInSession(id, "false"); await sb.commands.deleteSession(id); return [a.exitCode, a.error]; });
  await step("write", () => sb.files.writeFiles([{ path: "/tmp/d/a.txt", data: "l1\nl2\nl3\nl4\n", mode: 600 }]));
  await step("listDirectory", () => sb.files.listDirectory({ path: "/tmp/d", depth: 1 }));
  await step("readFile offset/limit", () => sb.files.readFile("/tmp/d/a.txt", { offset: 1, limit: 2 }));
  await step("readBytesStream", async () => { let n = 0; for await (const c of sb.files.readBytesStream("/tmp/d/a.txt")) n += c.length; return n; });
  await step("move", () => sb.files.moveFiles([{ src: "/tmp/d/a.txt", dest: "/tmp/d/b.txt" }]));
  await step("replace", () => sb.files.replaceContentsDetailed([{ path: "/tmp/d/b.txt", oldContent: "l2", newContent: "L2" }]));
  await step("replace (void)", () => sb.files.replaceContents([{ path: "/tmp/d/b.txt", oldContent: "l3", newContent: "L3" }]));
  await step("read", () => sb.files.readFile("/tmp/d/b.txt"));
  await step("setPermissions", () => sb.files.setPermissions([{ path: "/tmp/d/b.txt", mode: 640 }]));
  await step("info", () => sb.files.getFileInfo(["/tmp/d/b.txt", "/tmp/d"]));
  await step("stream upload", () => sb.files.writeFiles([{ path: "/tmp/d/big.bin", data: (async function*(){ for (let i=0;i<4;i++) yield new Uint8Array(1<<20).fill(i); })() }]));
  await step("blob upload", () => sb.files.writeFiles([{ path: "/tmp/d/blob.txt", data: new Blob(["blob!"]) }]));
  await step("info big", () => sb.files.getFileInfo(["/tmp/d/big.bin", "/tmp/d/blob.txt"]));
  await step("read missing", () => sb.files.readFile("/tmp/d/nope"));
  await step("timeout cmd", async () => { const r = await sb.commands.run("sleep 5", { timeoutSeconds: 1 }); return [r.exitCode, r.error]; });
  await step("status unknown", () => sb.commands.getCommandStatus("nope"));
  await step("uid", async () => { const r = await sb.commands.run("id -u", { uid: 1000 }); return [r.logs, r.exitCode, r.error]; });
  await step("patchMetadata", () => sb.patchMetadata({ a: "b" }));
  await step("egress", () => sb.getEgressPolicy());
  await step("isolation caps", () => sb.isolation.capabilities());
} finally { await sb.kill(); await sb.close(); }
