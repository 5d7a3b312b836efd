package native_test

import (
	"context"
	"crypto/rand"
	"net"
	"testing"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// Items 23 and 25 of the list of bad inputs: the sandbox service over the
// native backend, as `astrabox serve` runs it.

// service returns the sandbox service of a server wired as `astrabox
// serve` wires it (internal/server) over backend p and store st, with a
// throwaway vault. The server is not started: the test runs reconciler
// passes itself. t's cleanup closes it.
func service(t *testing.T, p sandbox.Provider, st store.Store) *lifecycle.Service {
	t.Helper()
	return newServer(t, p, st).Sandboxes
}

// newServer is the server that service returns the sandbox service of.
func newServer(t *testing.T, p sandbox.Provider, st store.Store) *server.Server {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ring, err := vault.New(key)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, Backends: map[string]sandbox.Provider{"native": p}, DefaultBackend: "native",
		Installed: []string{"native"}, Vault: ring, Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

// execdOf connects to a sandbox's execd through the service.
func execdOf(t *testing.T, svc *lifecycle.Service, id string) *execdclient.Client {
	t.Helper()
	rec, err := svc.Get(ctx(t), id)
	if err != nil {
		t.Fatal(err)
	}
	token, err := svc.AccessToken(ctx(t), rec)
	if err != nil {
		t.Fatal(err)
	}
	return execdclient.New("http://execd", execdclient.WithToken(token), execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return svc.Dial(ctx, rec)
	}))
}

func TestLifecycleExpiryMidWriteAndRestart(t *testing.T) {
	h := newHarness(t)
	st, err := sqlite.Open(ctx(t), t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc := service(t, h.p, st)
	short, long := time.Second, time.Hour

	expiring, err := svc.Create(ctx(t), lifecycle.CreateRequest{Timeout: &short})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := svc.Create(ctx(t), lifecycle.CreateRequest{Timeout: &long})
	if err != nil {
		t.Fatal(err)
	}
	// A writer that never stops, and a command still running, when the
	// TTL ends.
	x := execdOf(t, svc, expiring.ID)
	if _, err := x.Run(ctx(t), wire.RunCommandRequest{Command: "while :; do echo data >> /workspace/log; done", Background: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := execdOf(t, svc, kept.ID).Run(ctx(t), wire.RunCommandRequest{Command: "sleep 600", Background: true}); err != nil {
		t.Fatal(err)
	}

	// The server stops (nothing in memory survives) and an orphan appears:
	// a box the backend holds that no record names.
	orphan := "orphan" + time.Now().Format("150405")
	if _, err := h.p.Create(ctx(t), orphan, h.Spec()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(short) // the first box's TTL passes while no server runs
	p2, err := native.New(native.Config{DataDir: h.dataDir, Binary: testenv.AstraboxBinary(t), CgroupParent: h.cgroup})
	if err != nil {
		t.Fatal(err)
	}
	svc2 := service(t, p2, st)
	svc2.ReconcileBackend(ctx(t), "native", p2)

	// Expired: deleted mid-write, everything gone. Orphan: removed.
	if _, err := svc2.Get(ctx(t), expiring.ID); sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("expired sandbox after restart: %v", err)
	}
	h.CheckGone(t, expiring.ID)
	h.CheckGone(t, orphan)
	// Kept: re-attached, its command still running.
	rec, err := svc2.Get(ctx(t), kept.ID)
	if err != nil || rec.State != sandbox.StateRunning {
		t.Fatalf("kept sandbox after restart: %+v %v", rec, err)
	}
	n, err := execdOf(t, svc2, kept.ID).RunningCommands(ctx(t))
	if err != nil || n != 1 {
		t.Fatalf("running commands in the re-attached box: %d %v", n, err)
	}
	if err := svc2.Delete(ctx(t), kept.ID, "test_done"); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, kept.ID)
}
