package native_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// Item 41 of the list of bad inputs, and item 5's output floods: a box
// killed at its memory limit keeps a Failed record naming why until it is
// deleted, and what its execd retains of its commands' output never kills
// it.

func secs(s int64) *int64 { return &s }

// initPID returns the host pid of box id's init.
func initPID(t *testing.T, h *harness, id string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(h.dataDir, "boxes", id, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(b, &st); err != nil || st.PID <= 0 {
		t.Fatalf("state of %s: %s %v", id, b, err)
	}
	return st.PID
}

// oomKills returns the OOM kills box id's memory cgroup counted.
func oomKills(t *testing.T, h *harness, id string) int64 {
	t.Helper()
	for _, f := range []string{filepath.Join("/sys/fs/cgroup/memory", h.cgroup, id, "memory.oom_control"),
		filepath.Join("/sys/fs/cgroup", h.cgroup, id, "memory.events")} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("%s: %q", f, line)
				}
				return n
			}
		}
	}
	t.Fatalf("no OOM kill count for box %s", id)
	return 0
}

// waitFailed waits until the backend reports box id Failed (its init was
// reaped) and returns its reason.
func waitFailed(t *testing.T, h *harness, id string) string {
	t.Helper()
	c := ctx(t)
	for {
		info, err := h.p.Inspect(c, id)
		if err != nil {
			t.Fatalf("inspect %s: %v", id, err)
		}
		if info.State == sandbox.StateFailed {
			return info.Reason
		}
		select {
		case <-c.Done():
			t.Fatalf("box %s is still %s", id, info.State)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestOOMKilledBoxKeepsFailedRecord: a box whose init the kernel's OOM
// killer takes at the box's memory limit dies; its record stays, Failed
// with reason oom_killed, through later reconciler passes, while nothing
// of the box is left on the host; DELETE then removes the record.
func TestOOMKilledBoxKeepsFailedRecord(t *testing.T) {
	h := newHarness(t)
	st, err := sqlite.Open(ctx(t), t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := newServer(t, h.p, st)
	hs := httptest.NewServer(srv.Handler)
	defer hs.Close()
	c, svc := client.New(hs.URL, ""), srv.Sandboxes

	sb, err := c.Create(ctx(t), wire.CreateSandboxRequest{Timeout: secs(600), ResourceLimits: map[string]string{"memory": "64Mi"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.p.Delete(context.Background(), sb.ID) }) // when the test stops early
	// The OOM killer takes the process of the box with the highest
	// badness: init's is normally the lowest (it serves execd), and what
	// fills the box is killed instead. Raised above every other's, init is
	// taken, as when execd's own memory is what fills the box.
	pid := initPID(t, h, sb.ID)
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", pid), []byte("1000"), 0); err != nil {
		t.Fatal(err)
	}
	x := execdOf(t, svc, sb.ID)
	if _, err := x.Run(ctx(t), execdwire.RunCommandRequest{Command: "dd if=/dev/zero of=/dev/null bs=256M count=1", Background: true}); err != nil {
		t.Fatal(err)
	}
	reason := waitFailed(t, h, sb.ID)
	if !strings.HasPrefix(reason, sandbox.ReasonOOMKilled+": ") || !strings.Contains(reason, "64 MiB") {
		t.Fatalf("the backend's reason for the dead box: %q", reason)
	}

	for pass := range 2 {
		svc.ReconcileBackend(ctx(t), "native", h.p)
		got, err := c.Get(ctx(t), sb.ID)
		if err != nil {
			t.Fatalf("pass %d: GET of the dead box: %v", pass, err)
		}
		if got.Status.State != string(sandbox.StateFailed) || got.Status.Reason != sandbox.ReasonOOMKilled ||
			!strings.Contains(got.Status.Message, "OOM killer") {
			t.Fatalf("pass %d: status %+v, want Failed, oom_killed", pass, got.Status)
		}
		// Its remains are released at once; only the record stays.
		h.CheckGone(t, sb.ID)
	}
	if err := c.Delete(ctx(t), sb.ID); err != nil {
		t.Fatalf("DELETE of the dead box: %v", err)
	}
	if _, err := c.Get(ctx(t), sb.ID); client.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("GET after DELETE: %v", err)
	}
	h.CheckGone(t, sb.ID)
}

// TestOutputRetentionFitsTheBox: 24 background commands whose output
// together is 1.5 times the box's memory (each 1/16 of it, as 16 MiB is
// of 256 MiB) leave the box running: execd retains at most an eighth of
// the box's memory, and the kernel never has to kill anything.
func TestOutputRetentionFitsTheBox(t *testing.T) {
	const memory = 128 << 20
	h := newHarness(t)
	st, err := sqlite.Open(ctx(t), t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv := newServer(t, h.p, st)
	hs := httptest.NewServer(srv.Handler)
	defer hs.Close()
	c, svc := client.New(hs.URL, ""), srv.Sandboxes

	sb, err := c.Create(ctx(t), wire.CreateSandboxRequest{Timeout: secs(600), ResourceLimits: map[string]string{"memory": "128Mi"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.p.Delete(context.Background(), sb.ID) }) // when the test stops early
	x := execdOf(t, svc, sb.ID)
	status, err := x.ServerStatus(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if status.MemoryLimit != memory || status.OutputTotal != memory/8 || status.OutputLimit > status.OutputTotal {
		t.Fatalf("execd's retention in a %d-byte box: %+v", memory, status)
	}

	var ids []string
	for range 24 {
		ex, err := x.Run(ctx(t), execdwire.RunCommandRequest{Command: fmt.Sprintf("head -c %d /dev/zero", memory/16), Background: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ex.ID)
	}
	for _, id := range ids {
		waitFinished(t, x, id)
	}

	if n := oomKills(t, h, sb.ID); n != 0 {
		t.Fatalf("the kernel's OOM killer ran %d times in the box", n)
	}
	svc.ReconcileBackend(ctx(t), "native", h.p)
	got, err := c.Get(ctx(t), sb.ID)
	if err != nil || got.Status.State != string(sandbox.StateRunning) {
		t.Fatalf("the box after the output flood: %+v, %v", got, err)
	}
	status, err = x.ServerStatus(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if status.OutputRetained > status.OutputTotal {
		t.Fatalf("execd retains %d bytes, past its total of %d", status.OutputRetained, status.OutputTotal)
	}
	if err := c.Delete(ctx(t), sb.ID); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, sb.ID)
}

// waitFinished waits until command id has ended, and checks that it
// succeeded.
func waitFinished(t *testing.T, x *execdclient.Client, id string) {
	t.Helper()
	c := ctx(t)
	for {
		st, err := x.Status(c, id)
		if err != nil {
			t.Fatalf("status of %s: %v", id, err)
		}
		if !st.Running {
			if st.ExitCode == nil || *st.ExitCode != 0 {
				t.Fatalf("command %s ended: %+v", id, st)
			}
			return
		}
		select {
		case <-c.Done():
			t.Fatalf("command %s still runs", id)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
