import { Sandbox } from "@alibaba-group/opensandbox";
const step = async (name, opts) => { try { const sb = await Sandbox.create({ image: "host", ...opts }); const i = await sb.getInfo(); console.log("OK  ", name, i.status.state); await sb.kill(); await sb.close(); } catch (e) { console.log("FAIL", name, e.statusCode ?? "", e.error?.code ?? "", e.message); } };
await step("defaults", {});
await step("network deny+allow", { networkPolicy: { defaultAction: "deny", egress: [{ action: "allow", target: "pypi.org" }] } });
await step("network deny", { networkPolicy: { egress: [] } });
await step("resourceRequests", { resourceRequests: { cpu: "250m" } });
await step("platform", { platform: { os: "linux", arch: "amd64" } });
