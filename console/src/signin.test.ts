import { describe, expect, it } from "vitest";
import { loginHref, signInError, signInErrorText, withoutSignInError } from "./signin";

describe("sign-in errors", () => {
  it("reads every reason the server sends as a sentence", () => {
    for (const r of ["no_flow", "bad_flow", "provider_refused", "invalid_token", "user_refused", "flow_used", "not_offered"]) {
      const text = signInErrorText(r);
      expect(text).not.toContain(r);
      expect(text).toMatch(/^[A-Z].*\.$/);
    }
  });
  it("names an unknown reason, but only in safe characters and briefly", () => {
    expect(signInErrorText("weird_reason")).toBe("Signing in failed (weird_reason). Please try again.");
    expect(signInErrorText("<script>alert(1)</script>" + "x".repeat(80))).not.toMatch(/[<>()]{2}|x{41}/);
    expect(signInErrorText("")).toBe("Signing in failed. Please try again.");
  });
  it("finds the reason in a query, and removes it keeping the rest", () => {
    expect(signInError("?sign_in_error=flow_used")).toBe("flow_used");
    expect(signInError("?x=1")).toBeNull();
    expect(withoutSignInError("/", "?sign_in_error=flow_used", "#/agents")).toBe("/#/agents");
    expect(withoutSignInError("/", "?a=1&sign_in_error=x", "")).toBe("/?a=1");
  });
});

describe("loginHref", () => {
  it("comes back to the page, without a failure", () => {
    expect(loginHref("/api/v1/auth/login", "/", "?sign_in_error=no_flow", "#/admin/users")).toBe(
      "/api/v1/auth/login?next=" + encodeURIComponent("/#/admin/users"),
    );
    expect(loginHref("/login?x=1", "", "", "")).toBe("/login?x=1&next=%2F");
  });
});
