package api_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAPIKeyLifecycle: a user's keys over HTTP: made with scopes within
// the role, shown once, listed without secrets, narrowed by a demotion,
// killed by disabling the user and by revocation, refused when expired.
func TestAPIKeyLifecycle(t *testing.T) {
	e := newEnv(t, 0)
	carol := user(t, e, "carol", "member")

	st, cur := callAs(t, e, carol, "GET", "/api/v1/user/current", nil)
	if st != 200 || cur["user"].(map[string]any)["user_id"] != "carol" || !sameScopes(cur["scopes"], "read", "write") {
		t.Fatalf("current: %d %v", st, cur)
	}
	if st, out := callAs(t, e, carol, "POST", "/api/v1/user/api-keys", map[string]any{"name": "x", "scopes": []string{"admin"}}); st != 403 || out["code"] != "FORBIDDEN" {
		t.Errorf("a member's admin key: %d %v, want 403", st, out)
	}
	for _, bad := range []map[string]any{{"scopes": []string{"read"}}, {"name": "x", "scopes": []string{"root"}},
		{"name": "x", "expires_in_seconds": -1}, {"name": "x", "expires_at": "2001-01-01T00:00:00Z"}} {
		if st, out := callAs(t, e, carol, "POST", "/api/v1/user/api-keys", bad); st != 400 || out["code"] != "INVALID_REQUEST" {
			t.Errorf("key %v: %d %v, want 400 INVALID_REQUEST", bad, st, out)
		}
	}
	st, made := callAs(t, e, carol, "POST", "/api/v1/user/api-keys", map[string]any{"name": "ci", "scopes": []string{"read"}})
	if st != 201 || !strings.HasPrefix(made["key"].(string), "abx_"+made["key_id"].(string)+"_") {
		t.Fatalf("make a read key: %d %v", st, made)
	}
	readKey, readID := made["key"].(string), made["key_id"].(string)
	if st, out := callAs(t, e, readKey, "POST", "/v1/sandboxes", map[string]any{}); st != 403 {
		t.Errorf("a read key creates a sandbox: %d %v, want 403", st, out)
	}
	st, list := callAs(t, e, carol, "GET", "/api/v1/user/api-keys", nil)
	if st != 200 || len(list["items"].([]any)) != 2 || strings.Contains(mustJSON(list), made["key"].(string)[20:]) {
		t.Errorf("list: %d %v", st, list)
	}

	// A demotion narrows every key of the user at once.
	if st, out := callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/carol", map[string]any{"role": "viewer"}); st != 200 {
		t.Fatalf("demote: %d %v", st, out)
	}
	if _, cur := callAs(t, e, carol, "GET", "/api/v1/user/current", nil); !sameScopes(cur["scopes"], "read") {
		t.Errorf("after the demotion: %v", cur["scopes"])
	}
	// Disabling kills them.
	callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/carol", map[string]any{"disabled": true})
	if st, out := callAs(t, e, carol, "GET", "/api/v1/user/current", nil); st != 401 || out["code"] != "UNAUTHORIZED" {
		t.Errorf("a disabled user's key: %d %v", st, out)
	}
	callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/carol", map[string]any{"disabled": false})
	if st, _ := callAs(t, e, readKey, "GET", "/api/v1/user/current", nil); st != 200 {
		t.Errorf("enabled again: %d", st)
	}
	// Revocation kills one key.
	if st, out := callAs(t, e, testKey, "DELETE", "/api/v1/admin/users/carol/api-keys/"+readID, nil); st != 200 || out["revoked_at"] == nil {
		t.Errorf("revoke: %d %v", st, out)
	}
	if st, out := callAs(t, e, readKey, "GET", "/api/v1/user/current", nil); st != 401 || out["message"] != "missing or invalid API key" {
		t.Errorf("a revoked key: %d %v", st, out)
	}
	// The administrator cannot lock themselves out.
	if st, out := callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/admin", map[string]any{"role": "member"}); st != 403 {
		t.Errorf("self-demotion: %d %v", st, out)
	}
	// An expired key answers TOKEN_EXPIRED.
	st, short := callAs(t, e, testKey, "POST", "/api/v1/admin/users/carol/api-keys", map[string]any{"name": "short", "expires_in_seconds": 1})
	if st != 201 {
		t.Fatalf("short key: %d %v", st, short)
	}
	time.Sleep(1100 * time.Millisecond)
	if st, out := callAs(t, e, short["key"].(string), "GET", "/api/v1/user/current", nil); st != 401 || out["code"] != "TOKEN_EXPIRED" {
		t.Errorf("an expired key: %d %v", st, out)
	}
	// Every change is in the audit log.
	_, audit := callAs(t, e, testKey, "GET", "/api/v1/admin/audit?target=user:carol", nil)
	var actions []string
	for _, it := range audit["items"].([]any) {
		actions = append(actions, it.(map[string]any)["action"].(string))
	}
	if want := []string{"user.enable", "user.disable", "user.set_role", "user.create"}; !slices.Equal(actions, want) {
		t.Errorf("audit of carol: %v, want %v", actions, want)
	}
}

func sameScopes(v any, want ...string) bool {
	got, _ := v.([]any)
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
