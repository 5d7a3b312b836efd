package lifecycle

import (
	"context"
	"testing"
	"time"

	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// replicas returns two services on one store whose process backends
// share a directory (one backend instance), as two replicas sharing a
// Docker engine do.
func replicas(t *testing.T) (a, b *Service, st store.Store) {
	t.Helper()
	return replicasOn(t, nil)
}

// replicasOn is replicas whose Services record state events on the log
// logOf makes over their store (nil: each its own in-process log).
func replicasOn(t *testing.T, logOf func(store.Store) EventLog) (a, b *Service, st store.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dir := t.TempDir()
	var log EventLog
	if logOf != nil {
		log = logOf(st)
	}
	mk := func(holder string) *Service {
		p, err := process.New(process.Config{Dir: dir, Command: []string{"/bin/false"}})
		if err != nil {
			t.Fatal(err)
		}
		svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, DefaultBackend: "process", Holder: holder, EventLog: log})
		if err != nil {
			t.Fatal(err)
		}
		return svc
	}
	return mk("http://a"), mk("http://b"), st
}

func TestOneReplicaReconcilesAnInstance(t *testing.T) {
	a, b, st := replicas(t)
	ctx := context.Background()
	inst := a.Instance(ctx, "process")
	if inst == "" || inst != b.Instance(ctx, "process") {
		t.Fatalf("instances %q and %q: one directory is one instance", inst, b.Instance(ctx, "process"))
	}
	// A record whose box is gone: the holder's pass marks it Failed.
	now := time.Now().UTC()
	lost := &store.Sandbox{ID: "lost1", Backend: "process", Instance: inst, State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	// A record of another instance (another host's native backend, say):
	// never touched here, though this backend has no such box.
	foreign := &store.Sandbox{ID: "far1", Backend: "process", Instance: "process:elsewhere", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	for _, r := range []*store.Sandbox{lost, foreign} {
		if err := st.CreateSandbox(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	ttl := time.Minute
	b.reconcileBackend(ctx, "process", b.cfg.Backends["process"], ttl)
	if held, _ := b.holding.Load("process"); held != true {
		t.Fatal("the first replica to pass did not take the instance")
	}
	a.reconcileBackend(ctx, "process", a.cfg.Backends["process"], ttl)
	if held, _ := a.holding.Load("process"); held != false {
		t.Fatal("a second replica reconciled an instance another holds")
	}
	if h, _ := a.ReconcileHolder(ctx, inst); h != "http://b" {
		t.Fatalf("holder %q", h)
	}
	got, _ := st.GetSandbox(ctx, "lost1")
	if got.State != sandbox.StateFailed && got.State != sandbox.StateTerminated {
		t.Fatalf("the holder did not reconcile its instance's lost box: %s", got.State)
	}
	far, _ := st.GetSandbox(ctx, "far1")
	if far.State != sandbox.StateRunning {
		t.Fatalf("another instance's record was touched: %s %s", far.State, far.Reason)
	}
	// The holder stops passing: once its lease expires the other takes
	// over.
	b.reconcileBackend(ctx, "process", b.cfg.Backends["process"], time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for {
		a.reconcileBackend(ctx, "process", a.cfg.Backends["process"], ttl)
		if held, _ := a.holding.Load("process"); held == true {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the lease never passed to the other replica")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLegacyRecordsAreAdopted(t *testing.T) {
	a, _, st := replicas(t)
	ctx := context.Background()
	now := time.Now().UTC()
	old := &store.Sandbox{ID: "old1", Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	if err := st.CreateSandbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	a.reconcileBackend(ctx, "process", a.cfg.Backends["process"], time.Minute)
	got, _ := st.GetSandbox(ctx, "old1")
	if got.Instance != a.Instance(ctx, "process") {
		t.Fatalf("a record from before instances was not adopted: %q", got.Instance)
	}
}
