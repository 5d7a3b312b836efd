package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/internal/wait"
)

// callWith is callAs with extra headers.
func callWith(t *testing.T, e *env, key, method, path string, hdr map[string]string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader("{}"))
	if key != "" {
		req.Header.Set(api.HeaderAPIKey, key)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	_ = jsonDecodeBody(resp, &out)
	return resp.StatusCode, out
}

// TestForgedForwardedHeader: a client claiming to be a replica
// (X-AstraBox-Forwarded-By) is not believed: its deletion is audited.
func TestForgedForwardedHeader(t *testing.T) {
	e := newEnv(t, 0)
	st, box := callAs(t, e, testKey, "POST", "/v1/sandboxes", map[string]any{"image": map[string]any{"uri": "host"},
		"entrypoint": []string{"sleep", "300"}, "timeout": 600, "resourceLimits": map[string]string{}})
	if st != 202 {
		t.Fatalf("create: %d %v", st, box)
	}
	id := box["id"].(string)
	if st, out := callWith(t, e, testKey, "DELETE", "/v1/sandboxes/"+id, map[string]string{"X-AstraBox-Forwarded-By": "http://10.0.0.9:8080"}); st != 204 {
		t.Fatalf("delete: %d %v", st, out)
	}
	_, audit := callAs(t, e, testKey, "GET", "/api/v1/admin/audit?target=sandbox:"+id, nil)
	if items, _ := audit["items"].([]any); len(items) != 1 {
		t.Errorf("a deletion with a forged forwarding header left %v in the audit log, want one entry", audit)
	}
}

// TestKeysMintNoMoreThanTheyHold: a key makes keys only within its own
// scopes, and an administrator's read-and-admin (auditor's) key changes
// nothing.
func TestKeysMintNoMoreThanTheyHold(t *testing.T) {
	e := newEnv(t, 0)
	ada := user(t, e, "ada", "admin")
	st, auditor := callAs(t, e, testKey, "POST", "/api/v1/admin/users/ada/api-keys", map[string]any{"name": "auditor", "scopes": []string{"read", "admin"}})
	if st != 201 {
		t.Fatalf("auditor key: %d %v", st, auditor)
	}
	key := auditor["key"].(string)
	if st, out := callAs(t, e, key, "GET", "/api/v1/admin/users", nil); st != 200 {
		t.Errorf("the auditor lists users: %d %v", st, out)
	}
	if st, out := callAs(t, e, key, "POST", "/api/v1/admin/users", map[string]any{"user_id": "x", "role": "admin"}); st != 403 {
		t.Errorf("the auditor creates an administrator: %d %v, want 403", st, out)
	}
	if st, out := callAs(t, e, key, "POST", "/api/v1/admin/users/ada/api-keys", map[string]any{"name": "escalate"}); st != 403 {
		t.Errorf("the auditor mints a key: %d %v, want 403", st, out)
	}
	st, reader := callAs(t, e, ada, "POST", "/api/v1/user/api-keys", map[string]any{"name": "r", "scopes": []string{"read", "write"}})
	if st != 201 {
		t.Fatalf("a read-write key: %d %v", st, reader)
	}
	rw := reader["key"].(string)
	if st, out := callAs(t, e, rw, "POST", "/api/v1/user/api-keys", map[string]any{"name": "up", "scopes": []string{"admin"}}); st != 403 {
		t.Errorf("a read-write key mints an admin key: %d %v, want 403", st, out)
	}
	if st, out := callAs(t, e, rw, "POST", "/api/v1/user/api-keys", map[string]any{"name": "same"}); st != 201 || !sameScopes(out["scopes"], "read", "write") {
		t.Errorf("a read-write key's default: %d %v, want read and write", st, out)
	}
}

// TestEndpointTokenFollowsItsUser: a token handed to a member stops
// opening the box's port once the member is disabled.
func TestEndpointTokenFollowsItsUser(t *testing.T) {
	e := newEnv(t, 0)
	nina := user(t, e, "nina", "member")
	st, box := callAs(t, e, nina, "POST", "/v1/sandboxes", map[string]any{"image": map[string]any{"uri": "host"},
		"entrypoint": []string{"sleep", "300"}, "timeout": 600, "resourceLimits": map[string]string{}})
	if st != 202 {
		t.Fatalf("create: %d %v", st, box)
	}
	id := box["id"].(string)
	waitRunning(t, e, id)
	st, ep := callAs(t, e, nina, "GET", "/v1/sandboxes/"+id+"/endpoints/44772", nil)
	if st != 200 {
		t.Fatalf("endpoint: %d %v", st, ep)
	}
	tok := ep["headers"].(map[string]any)[api.HeaderProxyToken].(string)
	probe := func() int {
		st, _ := callWith(t, e, "", "GET", "/v1/sandboxes/"+id+"/proxy/44772/ping", map[string]string{api.HeaderProxyToken: tok})
		return st
	}
	if st := probe(); st == 401 || st == 403 || st == 404 {
		t.Fatalf("the token opens the port: %d", st)
	}
	callAs(t, e, testKey, "PATCH", "/api/v1/admin/users/nina", map[string]any{"disabled": true})
	if st := probe(); st != 401 {
		t.Errorf("the token of a disabled user: %d, want 401", st)
	}
}

// TestGatewayWritesNeedTheCSRFHeader: a write authenticated by the
// gateway's headers is a browser's too: it needs the CSRF header.
func TestGatewayWritesNeedTheCSRFHeader(t *testing.T) {
	e := newEnvConfig(t, 0, nil, func(c *server.Config) {
		c.Gateway = &identityapi.Gateway{Secret: "gw-secret-0123456789", UserHeader: "X-Forwarded-User", AdminGroups: []string{"ops"}, GroupsHeader: "X-Forwarded-Groups"}
	})
	gw := map[string]string{"X-AstraBox-Gateway-Secret": "gw-secret-0123456789", "X-Forwarded-User": "olga", "X-Forwarded-Groups": "ops"}
	if st, out := callWith(t, e, "", "POST", "/api/v1/admin/users", gw); st != 403 {
		t.Errorf("a gateway write without the CSRF header: %d %v, want 403", st, out)
	}
	gw[identityapi.CSRFHeader] = "1"
	if st, out := callWith(t, e, "", "POST", "/api/v1/admin/users", gw); st == 401 || st == 403 {
		t.Errorf("a gateway write with the CSRF header: %d %v", st, out)
	}
}

func jsonDecodeBody(resp *http.Response, v any) error { return json.NewDecoder(resp.Body).Decode(v) }

// waitRunning waits until box id is Running.
func waitRunning(t *testing.T, e *env, id string) {
	t.Helper()
	wait.Until(t, 30*time.Second, "box "+id+" running", func() bool {
		_, sb := callAs(t, e, testKey, "GET", "/v1/sandboxes/"+id, nil)
		st, _ := sb["status"].(map[string]any)
		return st != nil && st["state"] == "Running"
	})
}
