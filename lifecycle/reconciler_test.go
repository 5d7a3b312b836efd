package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// dyingBackend reports the boxes named in failed as Failed with their
// reason (and those in gone as unknown) and counts its deletes; every other
// box runs.
type dyingBackend struct {
	sandbox.Provider // nil: only what the reconciler calls is implemented

	mu      sync.Mutex
	failed  map[string]string
	gone    map[string]bool
	deletes map[string]int
}

func (p *dyingBackend) Name() string { return "fake" }

func (p *dyingBackend) Capabilities() sandbox.Capabilities { return sandbox.Capabilities{} }

func (p *dyingBackend) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gone[id] || p.deletes[id] > 0 {
		return sandbox.Info{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
	}
	if r, ok := p.failed[id]; ok {
		return sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: r}, nil
	}
	return sandbox.Info{ID: id, State: sandbox.StateRunning}, nil
}

func (p *dyingBackend) List(ctx context.Context) ([]sandbox.Info, error) { return nil, nil }

func (p *dyingBackend) Delete(ctx context.Context, id string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.deletes[id]++
	return nil
}

func (p *dyingBackend) deleted(id string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.deletes[id]
}

// TestDeadBoxKeepsFailedRecord: a box that dies while it runs keeps its
// record, Failed with the reason its backend gives (how it died), through
// later reconciler passes, until it is deleted; the backend's remains of
// it are released at once, and once. Records that are cleanup work (a
// failed delete or create, a warm pool's box) are still deleted.
func TestDeadBoxKeepsFailedRecord(t *testing.T) {
	const oom = "oom_killed: the box's init was killed by the kernel's OOM killer at its memory limit of 64 MiB"
	for _, tt := range []struct {
		name       string
		state      sandbox.State
		reason     string // the record's, before the passes
		pool       string
		failed     string // the backend's Failed reason ("": it runs)
		gone       bool   // the backend does not know the box
		wantKept   bool
		wantReason string
	}{
		{name: "oom killed", state: sandbox.StateRunning, failed: oom, wantKept: true, wantReason: oom},
		{name: "exited", state: sandbox.StateRunning, failed: "box_exited: the box's init exited with exit code 1",
			wantKept: true, wantReason: "box_exited: the box's init exited with exit code 1"},
		{name: "paused box killed", state: sandbox.StatePaused, failed: "box_exited: the box's init was killed by signal 9 (killed)",
			wantKept: true, wantReason: "box_exited: the box's init was killed by signal 9 (killed)"},
		{name: "uncoded backend reason", state: sandbox.StateRunning, failed: "its container was replaced behind the backend's back",
			wantKept: true, wantReason: "runtime_error: its container was replaced behind the backend's back"},
		{name: "lost", state: sandbox.StateRunning, gone: true, wantKept: true, wantReason: "box_lost"},
		{name: "a remote server's runtime error", state: sandbox.StateRunning, failed: "runtime_error: init exited",
			wantKept: true, wantReason: "runtime_error: init exited"},
		{name: "already failed, from an earlier server", state: sandbox.StateFailed, reason: "runtime_error: init exited: no init log",
			wantKept: true, wantReason: "runtime_error: init exited: no init log"},
		{name: "running box is untouched", state: sandbox.StateRunning, wantKept: true},
		{name: "pool box that died is removed", state: sandbox.StateRunning, pool: "default/abc", failed: oom},
		{name: "failed delete is retried", state: sandbox.StateFailed, reason: "delete_failed: engine unreachable"},
		{name: "refused create is removed", state: sandbox.StateFailed, reason: "provision_failed: no such image"},
		{name: "stopping is finished", state: sandbox.StateStopping, reason: "user_delete"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			p := &dyingBackend{failed: map[string]string{}, gone: map[string]bool{}, deletes: map[string]int{}}
			svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"fake": p}, DefaultBackend: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			const id = "box1"
			if tt.failed != "" {
				p.failed[id] = tt.failed
			}
			p.gone[id] = tt.gone
			now := time.Now().UTC().Truncate(time.Microsecond)
			rec := &store.Sandbox{ID: id, Backend: "fake", State: tt.state, Reason: tt.reason, Pool: tt.pool,
				CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
			must(t, st.CreateSandbox(ctx, rec))

			for range 3 {
				svc.ReconcileBackend(ctx, "fake", p)
			}
			got, err := svc.Get(ctx, id)
			if !tt.wantKept {
				if sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
					t.Fatalf("record after the passes: %+v, %v; want it deleted", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("the record is gone: %v", err)
			}
			if tt.wantReason == "" { // a running box
				if got.State != tt.state || p.deleted(id) != 0 {
					t.Fatalf("running box: %s %q, %d deletes", got.State, got.Reason, p.deleted(id))
				}
				return
			}
			if got.State != sandbox.StateFailed || got.Reason != tt.wantReason {
				t.Fatalf("record %s %q, want Failed %q", got.State, got.Reason, tt.wantReason)
			}
			if n := p.deleted(id); n != 1 {
				t.Fatalf("the backend's remains were deleted %d times, want once", n)
			}
			evs, err := svc.Events(ctx, id, 0)
			if err != nil {
				t.Fatal(err)
			}
			if tt.state != sandbox.StateFailed && (len(evs) == 0 || evs[len(evs)-1].State != sandbox.StateFailed || evs[len(evs)-1].Reason != tt.wantReason) {
				t.Fatalf("no Failed event with the reason: %+v", evs)
			}

			// A new server (nothing in memory) keeps it too, and releases
			// what may be left once more.
			svc2, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"fake": p}, DefaultBackend: "fake"})
			if err != nil {
				t.Fatal(err)
			}
			svc2.ReconcileBackend(ctx, "fake", p)
			svc2.ReconcileBackend(ctx, "fake", p)
			if got, err := svc2.Get(ctx, id); err != nil || got.State != sandbox.StateFailed || got.Reason != tt.wantReason {
				t.Fatalf("after a restart: %+v, %v", got, err)
			}
			if n := p.deleted(id); n != 2 {
				t.Fatalf("after a restart the remains were deleted %d times in all, want 2", n)
			}

			must(t, svc2.Delete(ctx, id, "user_delete"))
			if _, err := svc2.Get(ctx, id); sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
				t.Fatalf("after DELETE: %v", err)
			}
		})
	}
}

// TestKeptFailedExpires: a dead box's record still goes when its expiry
// passes.
func TestKeptFailedExpires(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p := &dyingBackend{failed: map[string]string{"box1": "oom_killed: out of memory"}, gone: map[string]bool{}, deletes: map[string]int{}}
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(time.Hour)
	must(t, st.CreateSandbox(ctx, &store.Sandbox{ID: "box1", Backend: "fake", State: sandbox.StateRunning,
		CreatedAt: now, UpdatedAt: now, LastActiveAt: now, ExpiresAt: &exp}))
	at := func(t0 time.Time) *Service {
		svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"fake": p}, DefaultBackend: "fake",
			Now: func() time.Time { return t0 }})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	at(now).ReconcileBackend(ctx, "fake", p)
	if got, err := st.GetSandbox(ctx, "box1"); err != nil || got.State != sandbox.StateFailed {
		t.Fatalf("before its expiry: %+v, %v", got, err)
	}
	at(exp.Add(time.Second)).ReconcileBackend(ctx, "fake", p)
	if _, err := st.GetSandbox(ctx, "box1"); err == nil {
		t.Fatal("the record of a dead box outlived its expiry")
	}
}
