package api_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// TestRevocationReachesEveryReplica: a key revoked, or a user disabled,
// at one replica is refused at another within a second.
func TestRevocationReachesEveryReplica(t *testing.T) {
	db := t.TempDir() + "/astrabox.db"
	replica := func() *env {
		st, err := sqlite.Open(context.Background(), db)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{"ASTRABOX_TEST_MAIN=1"}})
		if err != nil {
			t.Fatal(err)
		}
		srv := newServer(t, server.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p},
			Installed: []string{"process"}, DefaultBackend: "process"})
		if err := identity.EnsureBootstrapUser(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(srv.Handler)
		t.Cleanup(hs.Close)
		return &env{srv: hs}
	}
	a, b := replica(), replica()
	key := user(t, a, "erin", "member")
	if st, _ := callAs(t, b, key, "GET", "/api/v1/user/current", nil); st != 200 {
		t.Fatalf("the other replica takes erin's key: %d", st)
	}
	_, keys := callAs(t, a, key, "GET", "/api/v1/user/api-keys", nil)
	kid := keys["items"].([]any)[0].(map[string]any)["key_id"].(string)
	until := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(time.Second + 200*time.Millisecond)
		for {
			st, _ := callAs(t, b, key, "GET", "/api/v1/user/current", nil)
			if st == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: the other replica still answers %d after a second", what, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	callAs(t, a, testKey, "PATCH", "/api/v1/admin/users/erin", map[string]any{"disabled": true})
	until("disabled", 401)
	callAs(t, a, testKey, "PATCH", "/api/v1/admin/users/erin", map[string]any{"disabled": false})
	until("enabled again", 200)
	if st, _ := callAs(t, a, key, "DELETE", "/api/v1/user/api-keys/"+kid, nil); st != 200 {
		t.Fatalf("revoke: %d", st)
	}
	until("revoked", 401)
}
