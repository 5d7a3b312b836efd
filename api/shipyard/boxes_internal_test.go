package shipyard

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// TestGetKeepsAnotherUsersBox: asking for another user's box answers
// not_found and keeps what the facade holds of it (its owner's execd
// client, python context and python lock); a box really missing is
// forgotten.
func TestGetKeepsAnotherUsersBox(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"false"}})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p},
		DefaultBackend: "process", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	h := New(Config{Service: svc, Logger: log})
	now := time.Now().UTC()
	rec := &store.Sandbox{ID: "sbx_alices", Backend: "process", State: sandbox.StateRunning, Metadata: map[string]string{},
		CreatedAt: now, UpdatedAt: now, LastActiveAt: now, OwnerID: "alice", OrgID: "default"}
	if err := st.CreateSandbox(ctx, rec); err != nil {
		t.Fatal(err)
	}
	as := func(id string) context.Context {
		return identity.WithPrincipal(ctx, &identity.Principal{UserID: id, Role: identity.RoleMember,
			Scopes: identity.RoleScopes(identity.RoleMember), OrgID: "default"})
	}
	held := h.box(rec.ID)
	<-held.py // alice's python exec runs
	if _, err := h.get(as("bob"), rec.ID); err == nil {
		t.Fatal("bob gets alice's box")
	}
	if b, ok := h.boxes.Load(rec.ID); !ok || b.(*box) != held {
		t.Fatal("bob's get dropped alice's box state (and its python lock)")
	}
	if _, err := h.get(as("alice"), rec.ID); err != nil {
		t.Fatalf("alice gets her box: %v", err)
	}
	h.box("sbx_gone")
	if _, err := h.get(as("alice"), "sbx_gone"); err == nil {
		t.Fatal("a missing box is found")
	}
	if _, ok := h.boxes.Load("sbx_gone"); ok {
		t.Fatal("a missing box's state is kept")
	}
}
