import { afterEach, describe, expect, it, vi } from "vitest";
import { Client } from "./client";

interface Call {
  url: string;
  method: string;
  key: string | null;
  csrf: string | null;
  token: string | null;
}

/** Answers every fetch with answer(url) and records what was sent. */
function record(answer: (url: string) => unknown) {
  const calls: Call[] = [];
  vi.stubGlobal("fetch", async (url: string, init: RequestInit = {}) => {
    const h = new Headers(init.headers);
    calls.push({
      url,
      method: init.method ?? "GET",
      key: h.get("OPEN-SANDBOX-API-KEY"),
      csrf: h.get("X-AstraBox-CSRF"),
      token: h.get("X-AstraBox-Proxy-Token"),
    });
    return new Response(JSON.stringify(answer(url)), { status: 200 });
  });
  return calls;
}

afterEach(() => {
  vi.unstubAllGlobals();
});

describe("Client", () => {
  it("sends the key, and no CSRF header, when it has one", async () => {
    const calls = record(() => ({ items: [] }));
    const c = new Client("abx_k");
    await c.agents();
    await c.createAPIKey({ name: "laptop" });
    expect(calls.map((x) => [x.method, x.key, x.csrf])).toEqual([
      ["GET", "abx_k", null],
      ["POST", "abx_k", null],
    ]);
  });

  it("signed in by cookie, sends the CSRF header on every write and no key", async () => {
    const calls = record(() => ({}));
    const c = new Client(null);
    await c.agents();
    await c.createAPIKey({ name: "laptop" });
    await c.updateUser("u1", { role: "viewer" });
    await c.revokeAPIKey("k1");
    await c.logout();
    expect(calls.map((x) => [x.method, x.key, x.csrf])).toEqual([
      ["GET", null, null],
      ["POST", null, "1"],
      ["PATCH", null, "1"],
      ["DELETE", null, "1"],
      ["POST", null, "1"],
    ]);
  });

  it("signed in by cookie, reaches a box's proxy with an endpoint token, asked for once", async () => {
    const exp = new Date(Date.now() + 3600_000).toISOString();
    const calls = record((url) =>
      url.includes("/endpoints/") ? { endpoint: "x", headers: { "X-AstraBox-Proxy-Token": "tok-1" }, expiresAt: exp } : [],
    );
    const c = new Client(null);
    await c.listDir("sb1", "/tmp");
    await c.createPTY("sb1");
    expect(calls.map((x) => [x.method, x.url.split("?")[0], x.csrf, x.token])).toEqual([
      ["GET", "/v1/sandboxes/sb1/endpoints/44772", null, null],
      ["GET", "/v1/sandboxes/sb1/proxy/44772/directories/list", null, "tok-1"],
      ["POST", "/v1/sandboxes/sb1/proxy/44772/pty", null, "tok-1"],
    ]);
  });

  it("with a key, reaches a box's proxy with the key", async () => {
    const calls = record(() => []);
    await new Client("abx_k").listDir("sb1", "/tmp");
    expect(calls.map((x) => [x.url.split("?")[0], x.key, x.token])).toEqual([["/v1/sandboxes/sb1/proxy/44772/directories/list", "abx_k", null]]);
  });
});
