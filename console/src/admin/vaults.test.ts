import { afterEach, describe, expect, it, vi } from "vitest";
import { ApiError, Client } from "../api/client";
import type { Agent, Vault, VaultSecret } from "../api/types";
import { agentsUsing, deleteErrorText, delivery, destination, secretFields, secretRequest, toggleId, vaultNames } from "./vaults";

const secret = (over: Partial<VaultSecret> = {}): VaultSecret => ({
  name: "GITHUB_TOKEN",
  host: "api.github.com",
  path_prefix: "",
  header: "Authorization",
  format: "Bearer {value}",
  ...over,
});
const vault = (id: string, name: string, secrets: VaultSecret[] = []): Vault => ({ vault_id: id, name, description: "", secrets, version: 1 });
const agent = (id: string, name: string, vault_ids?: string[] | null): Agent => ({
  agent_id: id,
  name,
  engine_kind: "astrabox",
  runtime_profile: "test",
  model: "",
  instructions: "",
  permission_mode: "auto",
  tools: [],
  vault_ids,
  version: 1,
});

describe("vaults", () => {
  it("shows where a secret goes and how", () => {
    expect(destination(secret())).toBe("api.github.com");
    expect(destination(secret({ path_prefix: "/" }))).toBe("api.github.com");
    expect(destination(secret({ host: "*.example.com", path_prefix: "/v1" }))).toBe("*.example.com/v1");
    expect(delivery(secret())).toBe("Authorization: Bearer {value}");
    expect(delivery(secret({ header: "X-Api-Key", format: "{value}" }))).toBe("X-Api-Key: {value}");
  });

  it("sends a secret trimmed, leaving blanks to the server", () => {
    expect(secretRequest({ name: "K", host: " api.example.com ", path_prefix: " ", header: "", format: "" }, "s3cret")).toEqual({
      value: "s3cret",
      host: "api.example.com",
    });
    expect(secretRequest(secretFields(secret({ path_prefix: "/v1" })), "v")).toEqual({
      value: "v",
      host: "api.github.com",
      path_prefix: "/v1",
      header: "Authorization",
      format: "Bearer {value}",
    });
  });

  it("names the Agents a refused delete is about", () => {
    const v = vault("v1", "github");
    const agents = [agent("a1", "coder", ["v1"]), agent("a2", "careful", null), agent("a3", "reviewer", ["v2", "v1"])];
    expect(agentsUsing("v1", agents).map((a) => a.name)).toEqual(["coder", "reviewer"]);
    const inUse = new ApiError(409, "VAULT_IN_USE", "vault v1 is assigned to agents a1, a3: remove it from their vault_ids first");
    expect(deleteErrorText(inUse, v, agents)).toBe("Vault github is in use by agents coder, reviewer: remove it from their vaults first (VAULT_IN_USE).");
    expect(deleteErrorText(inUse, v, agents.slice(0, 1))).toContain("in use by agent coder:");
    expect(deleteErrorText(inUse, v, [])).toContain("in use by some agents");
    expect(deleteErrorText(new ApiError(404, "VAULT_NOT_FOUND", "vault not found"), v, agents)).toBe("vault not found (VAULT_NOT_FOUND)");
  });

  it("ticks vaults in the list's order", () => {
    const vaults = [vault("v1", "a"), vault("v2", "b"), vault("v3", "c")];
    expect(toggleId([], "v3", true, vaults)).toEqual(["v3"]);
    expect(toggleId(["v3"], "v1", true, vaults)).toEqual(["v1", "v3"]);
    expect(toggleId(["v1", "v3"], "v1", false, vaults)).toEqual(["v3"]);
    expect(toggleId(["gone", "v2"], "v1", true, vaults)).toEqual(["v1", "v2", "gone"]);
    expect(vaultNames(["v2", "gone"], vaults)).toEqual(["b", "gone"]);
    expect(vaultNames(null, vaults)).toEqual([]);
  });
});

describe("the vault calls", () => {
  afterEach(() => vi.unstubAllGlobals());

  const record = (status: number, body: unknown) => {
    const calls: { url: string; method?: string; body?: unknown; key: string | null }[] = [];
    vi.stubGlobal("fetch", async (url: string, init: RequestInit) => {
      calls.push({
        url,
        method: init.method,
        body: init.body === undefined ? undefined : JSON.parse(init.body as string),
        key: new Headers(init.headers).get("OPEN-SANDBOX-API-KEY"),
      });
      return new Response(status === 204 ? null : JSON.stringify(body), { status });
    });
    return calls;
  };

  it("puts a secret at its name with the key, and reads back the vault", async () => {
    const calls = record(201, vault("v 1", "github", [secret()]));
    const got = await new Client("k").putSecret("v 1", "GITHUB_TOKEN", { value: "s3cret", host: "api.github.com" });
    expect(calls).toEqual([
      { url: "/api/v1/vaults/v%201/secrets/GITHUB_TOKEN", method: "PUT", body: { value: "s3cret", host: "api.github.com" }, key: "k" },
    ]);
    expect(got.secrets?.[0].name).toBe("GITHUB_TOKEN");
  });

  it("lists, creates and deletes", async () => {
    const calls = record(204, null);
    const c = new Client("k");
    await c.deleteSecret("v1", "GITHUB_TOKEN");
    await c.deleteVault("v1");
    expect(calls.map((x) => `${x.method} ${x.url}`)).toEqual(["DELETE /api/v1/vaults/v1/secrets/GITHUB_TOKEN", "DELETE /api/v1/vaults/v1"]);
    const more = record(200, { items: [], next_cursor: null });
    await c.vaults();
    await c.createVault({ name: "github" });
    expect(more.map((x) => `${x.method} ${x.url}`)).toEqual(["GET /api/v1/vaults?limit=200", "POST /api/v1/vaults"]);
    expect(more[1].body).toEqual({ name: "github" });
  });

  it("fails with the server's code", async () => {
    record(409, { code: "VAULT_IN_USE", message: "vault v1 is assigned to agents a1" });
    await expect(new Client("k").deleteVault("v1")).rejects.toMatchObject({ status: 409, code: "VAULT_IN_USE" });
  });
});
