package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api"
)

// callAs makes one request with key (none when "") and returns the status
// and the decoded body.
func callAs(t *testing.T, e *env, key, method, path string, body any) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set(api.HeaderAPIKey, key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return resp.StatusCode, out // a stream: its status is the answer
	}
	b, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

// user creates a user of role with a key of every scope of the role, as
// the bootstrap administrator, and returns the key.
func user(t *testing.T, e *env, id, role string) string {
	t.Helper()
	if st, out := callAs(t, e, testKey, "POST", "/api/v1/admin/users", map[string]any{"user_id": id, "role": role}); st != 201 {
		t.Fatalf("create user %s: %d %v", id, st, out)
	}
	st, out := callAs(t, e, testKey, "POST", "/api/v1/admin/users/"+id+"/api-keys", map[string]any{"name": "test"})
	if st != 201 {
		t.Fatalf("create key of %s: %d %v", id, st, out)
	}
	return out["key"].(string)
}

// adminOnlyRoute matches the routes only an administrator may call:
// users, keys of others and the audit log; RuntimeProfiles' and sandbox
// profiles' changes; vaults. Snapshots and volumes are their owners'
// (TestSnapshotAndVolumeOwners): a member sees another's as missing.
var adminOnlyRoute = regexp.MustCompile(`^(\S+ /api/v1/admin/|\S+ /api/v1/vaults|(PUT|DELETE|POST) /api/v1/runtime-profiles/|PUT (/v1)?/profiles/)`)

// tokenRoute matches the GET routes that hand out what writes: an
// endpoint's token opens the box's port, as the proxy does with write.
var tokenRoute = regexp.MustCompile(`^GET (/v1)?/sandboxes/\{id\}/endpoints/`)

// telemetry are the non-GET routes that change nothing (the SDKs'
// client-side telemetry, accepted and dropped).
var telemetry = map[string]bool{"POST /v1/metrics/events": true, "POST /metrics/events": true}

// TestAuthorizationMatrix walks the server's route table: every route
// registered behind authentication refuses an anonymous caller, refuses a
// caller without the scope it needs, and lets an administrator through;
// on a sandbox's routes a member sees another member's box as missing.
// A route registered without a rule cannot exist (handle needs one), and
// every documented path of the OpenAPI file is either in the table or
// one of the routes that authenticate in their own way.
func TestAuthorizationMatrix(t *testing.T) {
	e := newEnv(t, 0)
	alice := user(t, e, "alice", "member")
	bob := user(t, e, "bob", "member")
	vic := user(t, e, "vic", "viewer")
	st, box := callAs(t, e, bob, "POST", "/v1/sandboxes", map[string]any{"image": map[string]any{"uri": "host"},
		"entrypoint": []string{"sleep", "300"}, "timeout": 600, "resourceLimits": map[string]string{}})
	if st != 202 {
		t.Fatalf("bob creates a sandbox: %d %v", st, box)
	}
	bobBox := box["id"].(string)

	srv := e.srvHandler()
	rules := srv.Rules()
	if len(rules) < 60 {
		t.Fatalf("only %d routes in the table", len(rules))
	}
	param := regexp.MustCompile(`\{[^}.]+(\.\.\.)?\}`)
	for _, rule := range rules {
		method, pattern, _ := strings.Cut(rule.Pattern, " ")
		concrete := param.ReplaceAllStringFunc(pattern, func(p string) string {
			if p == "{id}" && strings.Contains(pattern, "/sandboxes/{id}") {
				return bobBox
			}
			return "nope"
		})
		name := rule.Pattern
		if st, out := callAs(t, e, "", method, concrete, nil); st != 401 || out["code"] != "UNAUTHORIZED" {
			t.Errorf("%s anonymous: %d %v, want 401 UNAUTHORIZED", name, st, out)
		}
		if st, out := callAs(t, e, "abx_aaaaaaaaaaaa_"+strings.Repeat("a", 52), method, concrete, nil); st != 401 {
			t.Errorf("%s with a made-up key: %d %v, want 401", name, st, out)
		}
		// What each role may do follows from the route itself (its method
		// and path), not from the rule under test.
		write := (method != "GET" || tokenRoute.MatchString(rule.Pattern)) && !telemetry[rule.Pattern]
		adminOnly := adminOnlyRoute.MatchString(rule.Pattern)
		st, out := callAs(t, e, vic, method, concrete, nil)
		if write || adminOnly {
			if st != 403 || out["code"] != "FORBIDDEN" {
				t.Errorf("%s as a viewer: %d %v, want 403 FORBIDDEN", name, st, out)
			}
		} else if st == 401 || st == 403 {
			t.Errorf("%s as a viewer: %d %v, want the route's own answer", name, st, out)
		}
		st, out = callAs(t, e, alice, method, concrete, nil)
		switch {
		case adminOnly:
			if st != 403 || out["code"] != "FORBIDDEN" {
				t.Errorf("%s as a member: %d %v, want 403 FORBIDDEN", name, st, out)
			}
		case strings.Contains(pattern, "/sandboxes/{id}"):
			if st != 404 || out["code"] != "SANDBOX_NOT_FOUND" {
				t.Errorf("%s on another member's box: %d %v, want 404 SANDBOX_NOT_FOUND", name, st, out)
			}
		case st == 401 || st == 403:
			t.Errorf("%s as a member: %d %v, want the route's own answer", name, st, out)
		}
		if strings.Contains(pattern, "/sandboxes/{id}") && method != "GET" {
			continue // the administrator would change bob's box; GET shows they pass
		}
		if st, out := callAs(t, e, testKey, method, concrete, nil); st == 401 || st == 403 {
			t.Errorf("%s as the administrator: %d %v", name, st, out)
		}
	}

	// Bob sees his box, Alice does not; the administrator sees it.
	for _, tc := range []struct {
		who  string
		key  string
		want int
	}{{"bob", bob, 1}, {"alice", alice, 0}, {"admin", testKey, 1}} {
		st, out := callAs(t, e, tc.key, "GET", "/v1/sandboxes", nil)
		if st != 200 || len(out["items"].([]any)) != tc.want {
			t.Errorf("%s lists %d %v, want %d boxes", tc.who, st, out["items"], tc.want)
		}
	}
	// The proxy authenticates itself, with the same owners.
	for _, tc := range []struct {
		who, key string
		want     int
	}{{"anonymous", "", 401}, {"viewer", vic, 403}, {"alice", alice, 404}} {
		if st, out := callAs(t, e, tc.key, "GET", "/v1/sandboxes/"+bobBox+"/proxy/44772/ping", nil); st != tc.want {
			t.Errorf("proxy to bob's box as %s: %d %v, want %d", tc.who, st, out, tc.want)
		}
	}
	// So does the Shipyard facade.
	if st, out := callAs(t, e, bob, "GET", "/shipyard/v1/sandboxes/"+bobBox, nil); st != 200 {
		t.Errorf("shipyard: bob reads his box: %d %v, want 200", st, out)
	}
	if st, out := callAs(t, e, alice, "GET", "/shipyard/v1/sandboxes/"+bobBox, nil); st != 404 {
		t.Errorf("shipyard: alice reads bob's box: %d %v, want 404", st, out)
	}
	if st, out := callAs(t, e, vic, "POST", "/shipyard/v1/sandboxes", map[string]any{}); st != 403 {
		t.Errorf("shipyard: a viewer creates a box: %d %v, want 403", st, out)
	}
	if st, _ := callAs(t, e, bob, "DELETE", "/v1/sandboxes/"+bobBox, nil); st != 204 {
		t.Errorf("bob deletes his box: %d", st)
	}
	// The audit log holds who did what; only an administrator reads it.
	st, audit := callAs(t, e, testKey, "GET", "/api/v1/admin/audit?target=sandbox:"+bobBox, nil)
	items, _ := audit["items"].([]any)
	if st != 200 || len(items) != 1 || items[0].(map[string]any)["actor_id"] != "bob" ||
		items[0].(map[string]any)["action"] != "sandbox.delete" || items[0].(map[string]any)["request_id"] == "" {
		t.Errorf("audit of the deletion: %d %v", st, audit)
	}
	if st, _ = callAs(t, e, testKey, "GET", "/api/v1/admin/audit?action=api_key.", nil); st != 200 {
		t.Errorf("audit by action prefix: %d", st)
	}
	// Vault changes are audited, with the secret's name but never a value;
	// a refused change is not.
	st, v := callAs(t, e, testKey, "POST", "/api/v1/vaults", map[string]any{"name": "ci"})
	if st != 201 {
		t.Fatalf("create a vault: %d %v", st, v)
	}
	vid := v["vault_id"].(string)
	callAs(t, e, testKey, "PUT", "/api/v1/vaults/"+vid+"/secrets/GITHUB_TOKEN",
		map[string]any{"value": "ghp_not-a-real-token-0123456789", "host": "api.github.com"})
	callAs(t, e, alice, "DELETE", "/api/v1/vaults/"+vid, nil) // refused: alice is no administrator
	_, audit = callAs(t, e, testKey, "GET", "/api/v1/admin/audit?target=vault:"+vid, nil)
	var got []string
	for _, it := range audit["items"].([]any) {
		got = append(got, it.(map[string]any)["action"].(string))
	}
	if !slices.Equal(got, []string{"vault.secret_put"}) || !strings.Contains(mustJSON(audit), `"name":"GITHUB_TOKEN"`) ||
		strings.Contains(mustJSON(audit), "ghp_") {
		t.Errorf("audit of the vault: %v", mustJSON(audit))
	}

	// Every documented path is in the table, or authenticates itself.
	own := map[string]bool{"/v1/sandboxes/{}/proxy/{}/{}": true, "/healthz": true, "/readyz": true, "/metrics": true}
	inTable := map[string]bool{}
	norm := regexp.MustCompile(`\{[^}]+\}`)
	for _, r := range rules {
		_, p, _ := strings.Cut(r.Pattern, " ")
		inTable[norm.ReplaceAllString(p, "{}")] = true
	}
	for _, pattern := range srv.PublicRoutes() {
		_, p, _ := strings.Cut(pattern, " ")
		if !strings.HasPrefix(p, "/api/v1/auth/") {
			t.Errorf("public route %s is not a sign-in route", pattern)
		}
		own[p] = true
	}
	for _, line := range strings.Split(string(api.OpenAPI), "\n") {
		if strings.HasPrefix(line, "  /") && strings.HasSuffix(line, ":") {
			p := norm.ReplaceAllString(strings.TrimSuffix(strings.TrimSpace(line), ":"), "{}")
			if !inTable[p] && !own[p] {
				t.Errorf("documented path %s has no authorization rule", p)
			}
		}
	}
}

// srvHandler returns the API server behind e.
func (e *env) srvHandler() *api.Server { return e.handler }
