package runner_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/engine/astrabox"
	"github.com/astrabox/astrabox/platform/runner"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/store/streamlog"
)

// oneAgentCatalog has one Agent, agt_1, on one profile, and the built-in
// engine.
type oneAgentCatalog struct{ fakeCatalog }

func (oneAgentCatalog) Agent(_ context.Context, id string) (*store.Agent, error) {
	return &store.Agent{ID: id, EngineKind: astrabox.Kind, RuntimeProfile: "p", Model: "m", PermissionMode: "auto"}, nil
}
func (oneAgentCatalog) RuntimeProfile(context.Context, string) (lifecycle.Profile, error) {
	return lifecycle.Profile{Name: "p", Backend: "fake"}, nil
}
func (oneAgentCatalog) Engine(string) (engine.Adapter, error) { return astrabox.New(), nil }

// recordingSandboxes keeps the create requests (and makes no sandbox).
type recordingSandboxes struct {
	fakeSandboxes
	mu   sync.Mutex
	reqs []lifecycle.CreateRequest
}

func (r *recordingSandboxes) Create(ctx context.Context, req lifecycle.CreateRequest) (*store.Sandbox, error) {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.mu.Unlock()
	return r.fakeSandboxes.Create(ctx, req)
}

// TestSeamSandboxIsTheSessionOwners: the sandbox a Session's runtime is
// built in is asked for on behalf of the Session's owner.
func TestSeamSandboxIsTheSessionOwners(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boxes := &recordingSandboxes{}
	notifier := streamlog.NewLocal()
	m := runner.New(runner.Config{Catalog: oneAgentCatalog{}, Store: st, Sandboxes: boxes,
		Log: &streamlog.Log{Store: st, Notifier: notifier}, Notifier: notifier, Holder: "http://a",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(m.Close)
	now := time.Now().UTC().Truncate(time.Microsecond)
	rec := &store.Session{ID: platform.NewID("ses", now), AgentID: "agt_1", EngineKind: astrabox.Kind, State: platform.StateCreating,
		OwnerID: "alice", OrgID: "acme", CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	if err := st.CreateSession(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	m.Wake(rec.ID)
	deadline := time.Now().Add(time.Minute)
	for {
		boxes.mu.Lock()
		reqs := append([]lifecycle.CreateRequest(nil), boxes.reqs...)
		boxes.mu.Unlock()
		if len(reqs) > 0 {
			if got := reqs[0].Owner; got != (lifecycle.Owner{UserID: "alice", OrgID: "acme"}) {
				t.Fatalf("sandbox asked for on behalf of %+v, want the session's owner alice of acme", got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no sandbox was asked for")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
