// Package sandboxtest is the conformance suite every sandbox backend must
// pass unchanged: Run(t, harness) creates boxes through the backend's
// Provider and drives them through execd with the Go client. Cases that
// need something only some backends offer are gated by the backend's
// Capabilities (isolation, limits, pause) or by an optional interface of
// the harness (see harness.go), and skip with the reason otherwise; a
// case that checks a hazard gets a fresh box for each of its subtests.
package sandboxtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// Box is a running box of the backend under test.
type Box struct {
	ID     string
	Info   sandbox.Info
	Client *client.Client
}

// NewID returns a fresh box id for tests.
func NewID() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:])
}

// NewBox creates a box from spec (h.Spec() when nil), waits for its execd,
// and deletes it when the test ends.
func NewBox(t testing.TB, h Harness, spec *sandbox.Spec) *Box {
	t.Helper()
	p := h.Provider()
	s := h.Spec()
	if spec != nil {
		s = *spec
	}
	id := NewID()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	info, err := p.Create(ctx, id, s)
	if err != nil {
		t.Fatalf("create box: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		if err := p.Delete(ctx, id); err != nil {
			t.Errorf("delete box %s: %v", id, err)
		}
	})
	c := Connect(p, info)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("box %s: %v", id, err)
	}
	return &Box{ID: id, Info: info, Client: c}
}

// Connect returns a client for the execd of a box, reached through the
// provider's Dial.
func Connect(p sandbox.Provider, info sandbox.Info) *client.Client {
	return client.New("http://execd", client.WithToken(info.AccessToken), client.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return p.Dial(ctx, info.ID)
	}))
}

// Run runs the whole conformance suite against h.
func Run(t *testing.T, h Harness) {
	groups := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"Lifecycle", testLifecycle},
		{"Commands", testCommands},
		{"Sessions", testSessions},
		{"Code", testCode},
		{"Files", testFiles},
		{"PTY", testPTY},
		{"Proxy", testProxy},
		{"Metrics", testMetrics},
		{"Tunnel", testTunnel},
		{"Reattach", testReattach},
		{"Pause", testPause},
		{"KernelSurface", testKernelSurface},
		{"Limits", testLimits},
		{"Isolation", testIsolation},
		{"Orphans", testOrphans},
		{"Volumes", testVolumes},
		{"Snapshots", testSnapshots},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.fn(t, h) })
	}
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func testLifecycle(t *testing.T, h Harness) {
	p := h.Provider()
	ctx := ctxFor(t, 2*time.Minute)
	id := NewID()
	info, err := p.Create(ctx, id, h.Spec())
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if info.ID != id || info.State != sandbox.StateRunning {
		t.Fatalf("create returned %+v, want id %s Running", info, id)
	}
	again, err := p.Create(ctx, id, h.Spec())
	if err != nil || again.ID != id {
		t.Fatalf("create is not idempotent: %+v, %v", again, err)
	}
	got, err := p.Inspect(ctx, id)
	if err != nil || got.State != sandbox.StateRunning {
		t.Fatalf("inspect: %+v, %v", got, err)
	}
	list, err := p.List(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	found := false
	for _, b := range list {
		found = found || b.ID == id
	}
	if !found {
		t.Fatalf("list does not include %s", id)
	}
	if err := Connect(p, info).WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := p.Delete(ctx, id); err != nil {
		t.Fatalf("second delete is not idempotent: %v", err)
	}
	if _, err := p.Inspect(ctx, id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("inspect after delete: want ErrNotFound, got %v", err)
	}
	if lc, ok := h.(LeakChecker); ok {
		lc.CheckGone(t, id)
	}
	if err := p.Capabilities().Check(sandbox.Spec{Capabilities: []sandbox.Capability{sandbox.CapGPU}}); err == nil && !p.Capabilities().GPU {
		t.Fatal("capability check accepted gpu that the backend does not offer")
	}
}
