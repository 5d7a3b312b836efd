import { describe, expect, it } from "vitest";
import { parsePools } from "./metrics";

describe("parsePools", () => {
  it("reads ready boxes and claims per pool", () => {
    const text = `# HELP astrabox_pool_ready Ready boxes waiting in each warm pool.
# TYPE astrabox_pool_ready gauge
astrabox_pool_ready{pool="py/0a1b"} 3
astrabox_pool_ready{pool="sdk/ffee"} 0
# TYPE astrabox_pool_claims_total counter
astrabox_pool_claims_total{pool="py/0a1b",outcome="hit"} 7
astrabox_pool_claims_total{pool="py/0a1b",outcome="miss"} 2
astrabox_sandboxes{state="Running"} 4
`;
    expect(parsePools(text)).toEqual([
      { pool: "py/0a1b", profile: "py", ready: 3, hits: 7, misses: 2 },
      { pool: "sdk/ffee", profile: "sdk", ready: 0, hits: 0, misses: 0 },
    ]);
  });

  it("finds nothing in a server without pools", () => {
    expect(parsePools("# HELP x\nastrabox_api_errors_total 0\n")).toEqual([]);
  });
});
