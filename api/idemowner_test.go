package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
)

// callIdem is callAs with an Idempotency-Key; it returns the answer's
// headers besides.
func callIdem(t *testing.T, e *env, key, idem, method, path string, body any) (int, map[string]any, http.Header) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderAPIKey, key)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(api.HeaderIdempotencyKey, idem)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]any{}
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out, resp.Header
}

// TestIdempotencyKeysAreTheCallers: an Idempotency-Key is its user's own.
// Another user sending the same key and body gets its own sandbox, not a
// replay of the first user's, on the OpenSandbox API and on the Shipyard
// facade alike; renewing or extending another user's box with its key is
// refused as for any box the caller does not see.
func TestIdempotencyKeysAreTheCallers(t *testing.T) {
	e := newEnv(t, 0)
	alice := user(t, e, "alice", "member")
	bob := user(t, e, "bob", "member")

	t.Run("opensandbox", func(t *testing.T) {
		body := map[string]any{"image": map[string]any{"uri": "host"}, "entrypoint": []string{"sleep", "300"},
			"timeout": 600, "resourceLimits": map[string]string{}}
		st, a, _ := callIdem(t, e, alice, "same-key", "POST", "/v1/sandboxes", body)
		if st != 202 {
			t.Fatalf("alice creates: %d %v", st, a)
		}
		st, again, hdr := callIdem(t, e, alice, "same-key", "POST", "/v1/sandboxes", body)
		if st != 202 || again["id"] != a["id"] || hdr.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("alice's repeat: %d %v (replayed %q), want her box %v again", st, again, hdr.Get("Idempotent-Replayed"), a["id"])
		}
		st, b, hdr := callIdem(t, e, bob, "same-key", "POST", "/v1/sandboxes", body)
		if st != 202 || b["id"] == a["id"] || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("bob with alice's key and body: %d %v (replayed %q), want a box of his own", st, b, hdr.Get("Idempotent-Replayed"))
		}
		if st, out := callAs(t, e, bob, "GET", "/v1/sandboxes/"+b["id"].(string), nil); st != 200 {
			t.Fatalf("bob reads his box: %d %v", st, out)
		}
		renew := map[string]any{"expiresAt": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
		path := "/v1/sandboxes/" + a["id"].(string) + "/renew-expiration"
		if st, out, _ := callIdem(t, e, alice, "renew-key", "POST", path, renew); st != 200 {
			t.Fatalf("alice renews her box: %d %v", st, out)
		}
		if st, out, _ := callIdem(t, e, bob, "renew-key", "POST", path, renew); st != 404 {
			t.Fatalf("bob renews alice's box with her key and body: %d %v, want 404", st, out)
		}
	})

	t.Run("shipyard", func(t *testing.T) {
		body := map[string]any{"ttl": 600}
		st, a, _ := callIdem(t, e, alice, "bay-key", "POST", "/shipyard/v1/sandboxes", body)
		if st != 201 {
			t.Fatalf("alice creates: %d %v", st, a)
		}
		st, b, hdr := callIdem(t, e, bob, "bay-key", "POST", "/shipyard/v1/sandboxes", body)
		if st != 201 || b["id"] == a["id"] || hdr.Get("Idempotent-Replayed") != "" {
			t.Fatalf("bob with alice's key and body: %d %v (replayed %q), want a sandbox of his own", st, b, hdr.Get("Idempotent-Replayed"))
		}
		path := "/shipyard/v1/sandboxes/" + a["id"].(string) + "/extend_ttl"
		ext := map[string]any{"extend_by": 60}
		if st, out, _ := callIdem(t, e, alice, "ext-key", "POST", path, ext); st != 200 {
			t.Fatalf("alice extends her sandbox: %d %v", st, out)
		}
		if st, out, _ := callIdem(t, e, bob, "ext-key", "POST", path, ext); st != 404 {
			t.Fatalf("bob extends alice's sandbox with her key and body: %d %v, want 404", st, out)
		}
	})
}

// TestShipyardDeleteIsAudited: a sandbox deleted through the Shipyard
// facade is in the audit log, as one deleted through the OpenSandbox API.
func TestShipyardDeleteIsAudited(t *testing.T) {
	e := newEnv(t, 0)
	alice := user(t, e, "alice", "member")
	st, sb := callAs(t, e, alice, "POST", "/shipyard/v1/sandboxes", map[string]any{"ttl": 600})
	if st != 201 {
		t.Fatalf("alice creates: %d %v", st, sb)
	}
	id := sb["id"].(string)
	if st, out := callAs(t, e, alice, "DELETE", "/shipyard/v1/sandboxes/"+id, nil); st != 204 {
		t.Fatalf("alice deletes: %d %v", st, out)
	}
	st, audit := callAs(t, e, testKey, "GET", "/api/v1/admin/audit?target=sandbox:"+id, nil)
	items, _ := audit["items"].([]any)
	if st != 200 || len(items) != 1 {
		t.Fatalf("audit of the deletion: %d %v, want one entry", st, audit)
	}
	if it := items[0].(map[string]any); it["actor_id"] != "alice" || it["action"] != "sandbox.delete" || it["request_id"] == "" {
		t.Fatalf("audit of the deletion: %v", it)
	}
}
