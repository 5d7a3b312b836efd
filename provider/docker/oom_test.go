package docker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// Item 41 of the list of bad inputs, and item 5's output floods, on the
// docker backend: a box killed at its memory limit keeps a Failed record
// naming why until it is deleted, and what its execd retains of its
// commands' output never kills it.

// service is the sandbox service over h's backend, on a fresh store; the
// test runs reconciler passes itself.
func service(t *testing.T, h *harness) *lifecycle.Service {
	t.Helper()
	st, err := sqlite.Open(ctx(t), t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"docker": h.p}, DefaultBackend: "docker"})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

// createSmall creates a box of memory bytes through svc.
func createSmall(t *testing.T, h *harness, svc *lifecycle.Service, memory int64) string {
	t.Helper()
	timeout := 10 * time.Minute
	rec, err := svc.Create(ctx(t), lifecycle.CreateRequest{Image: h.image, Timeout: &timeout,
		Resources: sandbox.Resources{MemoryBytes: memory}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.p.Delete(context.Background(), rec.ID) }) // when the test stops early
	return rec.ID
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

// oomKills returns the OOM kills box id's memory cgroup counted.
func oomKills(t *testing.T, h *harness, id string) int64 {
	t.Helper()
	for _, file := range []string{"memory.oom_control", "memory.events"} {
		b, err := os.ReadFile(h.cgroupFile(t, id, "memory", file))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %q", file, line)
				}
				return n
			}
		}
	}
	t.Fatalf("no OOM kill count for box %s", id)
	return 0
}

// TestOOMKilledBoxKeepsFailedRecord: a box whose first process the
// kernel's OOM killer takes at the box's memory limit dies; its record
// stays, Failed with reason oom_killed, through later reconciler passes,
// while its container is removed; a delete then removes the record.
func TestOOMKilledBoxKeepsFailedRecord(t *testing.T) {
	h := newHarness(t, nil)
	svc := service(t, h)
	id := createSmall(t, h, svc, 64<<20)
	// The OOM killer takes the process of the box with the highest
	// badness: with the container's init's raised above every other's, it
	// takes init, as when execd's own memory is what fills the box.
	x := execdOf(t, svc, id)
	if _, err := x.Run(ctx(t), wire.RunCommandRequest{Command: "echo 1000 > /proc/1/oom_score_adj && dd if=/dev/zero of=/dev/null bs=256M count=1",
		Background: true}); err != nil {
		t.Fatal(err)
	}
	var reason string
	wait.Until(t, time.Minute, "the box to die", func() bool {
		info, err := h.p.Inspect(ctx(t), id)
		reason = info.Reason
		return err == nil && info.State == sandbox.StateFailed
	})
	if !strings.HasPrefix(reason, sandbox.ReasonOOMKilled+": ") {
		t.Fatalf("the backend's reason for the dead box: %q", reason)
	}
	for pass := range 2 {
		svc.ReconcileBackend(ctx(t), "docker", h.p)
		rec, err := svc.Get(ctx(t), id)
		if err != nil || rec.State != sandbox.StateFailed || !strings.HasPrefix(rec.Reason, sandbox.ReasonOOMKilled+": ") {
			t.Fatalf("pass %d: record %+v, %v; want Failed, oom_killed", pass, rec, err)
		}
		h.CheckGone(t, id)
	}
	if err := svc.Delete(ctx(t), id, "user_delete"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Get(ctx(t), id); sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("after the delete: %v", err)
	}
	h.CheckGone(t, id)
}

// TestOutputRetentionFitsTheBox: 24 background commands whose output
// together is 1.5 times the box's memory leave the box running: execd
// retains at most an eighth of the box's memory.
func TestOutputRetentionFitsTheBox(t *testing.T) {
	const memory = 128 << 20
	h := newHarness(t, nil)
	svc := service(t, h)
	id := createSmall(t, h, svc, memory)
	x := execdOf(t, svc, id)
	status, err := x.ServerStatus(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if status.MemoryLimit != memory || status.OutputTotal != memory/8 {
		t.Fatalf("execd's retention in a %d-byte box: %+v", memory, status)
	}
	var ids []string
	for range 24 {
		ex, err := x.Run(ctx(t), wire.RunCommandRequest{Command: fmt.Sprintf("head -c %d /dev/zero", memory/16), Background: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ex.ID)
	}
	for _, cid := range ids {
		wait.Until(t, time.Minute, "command "+cid+" to end", func() bool {
			st, err := x.Status(ctx(t), cid)
			return err == nil && !st.Running
		})
	}
	if n := oomKills(t, h, id); n != 0 {
		t.Fatalf("the kernel's OOM killer ran %d times in the box", n)
	}
	svc.ReconcileBackend(ctx(t), "docker", h.p)
	if rec, err := svc.Get(ctx(t), id); err != nil || rec.State != sandbox.StateRunning {
		t.Fatalf("the box after the output flood: %+v, %v", rec, err)
	}
	if err := svc.Delete(ctx(t), id, "user_delete"); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, id)
}
