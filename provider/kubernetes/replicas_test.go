package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
	"github.com/astrabox/astrabox/store/sqlite"
)

// TestReplicasShareOneReconciler checks two AstraBox replicas serving one
// namespace as one owner, as the Deployment of deploy/kubernetes does:
// their backends are one instance (the cluster's identity, namespace and
// owner), only one replica at a time reconciles it, the holder removes a
// box no record names (whichever replica's Provider made it), and the
// other takes over once the holder stops renewing.
func TestReplicasShareOneReconciler(t *testing.T) {
	h := newHarness(t, nil)
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	replica := func(holder string) (*lifecycle.Service, *Provider) {
		p := h.Reopen(t).(*Provider)
		svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"kubernetes": p},
			DefaultBackend: "kubernetes", Holder: holder})
		if err != nil {
			t.Fatal(err)
		}
		return svc, p
	}
	a, pa := replica("http://a")
	b, pb := replica("http://b")
	inst := a.Instance(ctx(t), "kubernetes")
	if !strings.Contains(inst, h.cfg.Namespace+":"+h.cfg.Owner) || inst != b.Instance(ctx(t), "kubernetes") {
		t.Fatalf("instances %q and %q: one namespace and owner is one instance", inst, b.Instance(ctx(t), "kubernetes"))
	}

	// A box without a record (a create whose server died before it wrote
	// one), made through replica b's Provider.
	stray := sandboxtest.NewID()
	if _, err := pb.Create(ctx(t), stray, h.Spec()); err != nil {
		t.Fatal(err)
	}
	a.ReconcileBackend(ctx(t), "kubernetes", pa)
	if holder, _ := a.ReconcileHolder(ctx(t), inst); holder != "http://a" {
		t.Fatalf("holder after a's pass: %q", holder)
	}
	b.ReconcileBackend(ctx(t), "kubernetes", pb)
	if holder, _ := b.ReconcileHolder(ctx(t), inst); holder != "http://a" {
		t.Fatalf("b took an instance a holds: holder %q", holder)
	}
	if _, err := pa.Inspect(ctx(t), stray); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the holder's pass left the box without a record: %v", err)
	}
	h.CheckGone(t, stray)

	// a stops passing: after its lease (three intervals; 15 s by default)
	// b's pass takes the instance.
	deadline := time.Now().Add(time.Minute)
	for {
		b.ReconcileBackend(ctx(t), "kubernetes", pb)
		if holder, _ := b.ReconcileHolder(ctx(t), inst); holder == "http://b" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("b did not take over within a minute of a's last pass")
		}
		time.Sleep(time.Second)
	}
}
