import { describe, expect, it } from "vitest";
import { href, parseRoute } from "./router";

describe("routes", () => {
  it.each([
    ["", []],
    ["#", []],
    ["#/", []],
    ["#/chat", ["chat"]],
    ["#/chat/a1/s2", ["chat", "a1", "s2"]],
    ["#/sandboxes/x//files/", ["sandboxes", "x", "files"]],
    ["#/admin/a%2Fb", ["admin", "a/b"]],
  ])("parses %s", (hash, want) => {
    expect(parseRoute(hash)).toEqual(want);
  });

  it("round-trips segments through href", () => {
    const segs = ["chat", "agent one", "s/2"];
    expect(parseRoute(href(...segs))).toEqual(segs);
  });
});
