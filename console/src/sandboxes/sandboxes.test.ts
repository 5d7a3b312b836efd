import { describe, expect, it } from "vitest";
import type { Sandbox, SandboxState } from "../api/types";
import type { Client } from "../api/client";
import { actionsFor, renewTarget, runAction } from "./actions";
import { merge } from "./useSandboxes";
import { baseName, join, parent } from "./paths";

const box = (state: SandboxState, at = "2026-12-01T10:00:00Z"): Sandbox => ({
  id: "b1",
  status: { state, lastTransitionAt: at },
  entrypoint: [],
  createdAt: at,
});

const now = new Date("2026-12-01T10:00:00Z");
const expiring = (state: SandboxState, expiresAt?: string): Sandbox => ({ ...box(state), expiresAt });

describe("sandboxes", () => {
  it.each<[SandboxState, string[]]>([
    ["Running", ["pause", "renew", "delete"]],
    ["Paused", ["resume", "renew", "delete"]],
    ["Pending", ["delete"]],
    ["Failed", ["delete"]],
    ["Terminated", []],
  ])("offers for %s, expiring in ten minutes: %j", (state, want) => {
    expect(actionsFor(expiring(state, "2026-12-01T10:10:00Z"), now)).toEqual(want);
  });

  it.each<[string, string | undefined, string | null]>([
    ["expiring in ten minutes", "2026-12-01T10:10:00Z", "2026-12-01T11:00:00.000Z"],
    ["already expired", "2026-12-01T09:00:00Z", "2026-12-01T11:00:00.000Z"],
    ["expiring in two hours", "2026-12-01T12:00:00Z", null],
    ["expiring in exactly an hour", "2026-12-01T11:00:00Z", null],
    ["never expiring", undefined, null],
  ])("renew never shortens a box %s", (_, expiresAt, want) => {
    const s = expiring("Running", expiresAt);
    expect(renewTarget(s, now)?.toISOString() ?? null).toBe(want);
    expect(actionsFor(s, now).includes("renew")).toBe(want !== null);
  });

  it("refuses a renew that would shorten a box without asking the server", async () => {
    const calls: string[] = [];
    const client = { renewSandbox: (id: string) => (calls.push(id), Promise.resolve({ expiresAt: "" })) } as unknown as Client;
    await expect(runAction(client, expiring("Running", "2026-12-01T12:00:00Z"), "renew", now)).rejects.toThrow("more than an hour");
    await expect(runAction(client, expiring("Running"), "renew", now)).rejects.toThrow("never expires");
    await runAction(client, expiring("Running", "2026-12-01T10:10:00Z"), "renew", now);
    expect(calls).toEqual(["b1"]);
  });

  it("takes a newer state from an event, not an older one", () => {
    const newer = { seq: 3, sandboxId: "b1", state: "Paused" as const, at: "2026-12-01T10:00:05Z" };
    const older = { ...newer, at: "2026-12-01T09:59:00Z" };
    expect(merge([box("Running")], { b1: newer })[0].status.state).toBe("Paused");
    expect(merge([box("Running")], { b1: older })[0].status.state).toBe("Running");
    expect(merge([box("Running")], {})[0].status.state).toBe("Running");
  });

  it.each([
    ["/tmp/a", "/tmp"],
    ["/tmp/a/", "/tmp"],
    ["/tmp", "/"],
    ["/", "/"],
  ])("parent of %s is %s", (dir, want) => {
    expect(parent(dir)).toBe(want);
  });

  it("joins and names paths", () => {
    expect(join("/", "x")).toBe("/x");
    expect(join("/tmp", "x")).toBe("/tmp/x");
    expect(baseName("/tmp/dir/")).toBe("dir");
    expect(baseName("/tmp/a.txt")).toBe("a.txt");
  });
});
