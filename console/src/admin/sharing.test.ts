import { describe, expect, it } from "vitest";
import type { Agent } from "../api/types";
import type { User } from "../api/identity";
import { accessChanged, accessOf, accessRequest, addIds, whoIs } from "./sharing";
import { can, canManageAgent, keyScopes } from "../permissions";
import { keyState, sortKeys } from "../account/keys";

const agent = (over: Partial<Agent>): Agent =>
  ({ agent_id: "a1", name: "a", engine_kind: "astrabox", runtime_profile: "p", model: "", instructions: "", permission_mode: "auto", tools: [], version: 1, ...over }) as Agent;

const me = (role: string, scopes: string[], id = "usr_me") => ({
  user: { user_id: id, kind: "human", role, disabled: false, created_at: "", last_login_at: null },
  scopes,
});

describe("sharing", () => {
  it("reads an Agent's access, private by default", () => {
    expect(accessOf(null)).toEqual({ visibility: "private", allowed_user_ids: [], admins: [] });
    expect(accessOf(agent({ visibility: "shared", allowed_user_ids: ["b"], admins: null }))).toEqual({
      visibility: "shared",
      allowed_user_ids: ["b"],
      admins: [],
    });
  });
  it("sees a change, not a reordering", () => {
    const a = { visibility: "shared" as const, allowed_user_ids: ["a", "b"], admins: [] };
    expect(accessChanged(a, { ...a, allowed_user_ids: ["b", "a"] })).toBe(false);
    expect(accessChanged(a, { ...a, admins: ["c"] })).toBe(true);
    expect(accessChanged(a, { ...a, visibility: "public" })).toBe(true);
  });
  it("adds typed ids once, split on commas and spaces", () => {
    expect(addIds(["a"], " a, b  c,")).toEqual(["a", "b", "c"]);
  });
  it("sends the allowed users only when shared", () => {
    expect(accessRequest("public", ["a"], ["b"])).toEqual({ visibility: "public", allowed_user_ids: [], admins: ["b"] });
  });
  it("names users", () => {
    const users = [{ user_id: "u1", display_name: "Ann", kind: "human", role: "member", disabled: false, created_at: "", last_login_at: null }] as User[];
    expect(whoIs("usr_me", "usr_me", users)).toBe("you");
    expect(whoIs("u1", "usr_me", users)).toBe("Ann");
    expect(whoIs("u2", "usr_me", users)).toBe("u2");
  });
});

describe("permissions", () => {
  it("lets an Agent's owner, its admins and administrators manage it, with write", () => {
    expect(canManageAgent(me("member", ["read", "write"]), agent({ owner_id: "usr_me" }))).toBe(true);
    expect(canManageAgent(me("member", ["read", "write"]), agent({ owner_id: "x", admins: ["usr_me"] }))).toBe(true);
    expect(canManageAgent(me("member", ["read", "write"]), agent({ owner_id: "x" }))).toBe(false);
    expect(canManageAgent(me("admin", ["read", "write", "admin"]), agent({ owner_id: "x" }))).toBe(true);
    expect(canManageAgent(me("member", ["read"]), agent({ owner_id: "usr_me" }))).toBe(false);
  });
  it("offers a key the scopes of its owner's role", () => {
    expect(keyScopes(me("viewer", ["read"]))).toEqual(["read"]);
    expect(keyScopes(me("admin", ["read"]))).toEqual(["read", "write", "admin"]);
    expect(can(me("admin", ["read"]), "admin")).toBe(false);
  });
});

describe("keys", () => {
  const k = (id: string, created: string, over = {}) => ({
    key_id: id, user_id: "u", name: id, scopes: ["read"], created_at: created, expires_at: null, last_used_at: null, revoked_at: null, ...over,
  });
  it("knows revoked and expired keys, and lists the active ones first, newest first", () => {
    const now = Date.parse("2030-01-02T00:00:00Z");
    const keys = [
      k("old", "2030-01-01T00:00:00Z"),
      k("gone", "2030-01-01T12:00:00Z", { revoked_at: "2030-01-01T13:00:00Z" }),
      k("new", "2030-01-01T06:00:00Z"),
      k("past", "2030-01-01T07:00:00Z", { expires_at: "2030-01-01T08:00:00Z" }),
    ];
    expect(keyState(keys[1], now)).toBe("revoked");
    expect(keyState(keys[3], now)).toBe("expired");
    expect(sortKeys(keys, now).map((x) => x.key_id)).toEqual(["new", "old", "gone", "past"]);
  });
});
