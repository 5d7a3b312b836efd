import { describe, expect, it } from "vitest";
import type { Sandbox, SandboxState } from "../api/types";
import { actionsFor } from "./actions";
import { merge } from "./useSandboxes";
import { baseName, join, parent } from "./paths";

const box = (state: SandboxState, at = "2026-12-01T10:00:00Z"): Sandbox => ({
  id: "b1",
  status: { state, lastTransitionAt: at },
  entrypoint: [],
  createdAt: at,
});

describe("sandboxes", () => {
  it.each<[SandboxState, string[]]>([
    ["Running", ["pause", "renew", "delete"]],
    ["Paused", ["resume", "renew", "delete"]],
    ["Pending", ["delete"]],
    ["Failed", ["delete"]],
    ["Terminated", []],
  ])("offers for %s: %j", (state, want) => {
    expect(actionsFor(box(state))).toEqual(want);
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
