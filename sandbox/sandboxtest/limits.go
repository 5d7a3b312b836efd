package sandboxtest

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// limitedResources are the limits of the boxes the Limits case attacks.
var limitedResources = sandbox.Resources{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 64 << 20, MilliCPU: 500}

// needLimits skips t unless the backend enforces every one of rs.
func needLimits(t *testing.T, h Harness, rs ...sandbox.Resource) {
	t.Helper()
	caps := h.Provider().Capabilities()
	for _, r := range rs {
		if !slices.Contains(caps.Limits, r) {
			t.Skipf("backend %s does not enforce the %s limit", h.Provider().Name(), r)
		}
	}
}

// testLimits attacks each limit the backend claims to enforce from inside
// a box of limitedResources; each hazard gets a box of its own, so that
// one's aftermath cannot blur another's result. A backend that does not
// claim the disk limit may refuse one (CodeCapability) rather than hold it
// only in part: its hazards but DiskFill run without one.
func testLimits(t *testing.T, h Harness) {
	p := h.Provider()
	diskClaimed := slices.Contains(p.Capabilities().Limits, sandbox.ResourceDisk)
	spec := h.Spec()
	spec.Resources = limitedResources
	if !diskClaimed {
		spec.Resources.DiskBytes = 0
	}
	newBox := func(t *testing.T) *Box { return NewBox(t, h, &spec) }

	t.Run("ForkBomb", func(t *testing.T) {
		needLimits(t, h, sandbox.ResourcePIDs)
		tc, ok := h.(TaskCounter)
		if !ok {
			t.Skip("the harness cannot count a box's tasks from the host (TaskCounter)")
		}
		b := newBox(t)
		// The bomb backgrounds itself, so the command returns at once and
		// the bomb runs on: the pids limit must hold it, the host must stay
		// responsive, and delete must still remove everything. Its output
		// goes nowhere: once the command has returned, execd closes its
		// pipes, and the shells' "fork: retry" messages would kill them
		// with SIGPIPE, letting the bomb die out before it is seen.
		const bomb = "exec > /dev/null 2>&1; bomb() { bomb | bomb & }; bomb"
		if _, err := b.Client.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{Command: bomb}); err != nil {
			// The box may fill before the answer is out, and its stream be
			// cut (execd cannot start a thread at the limit): what follows
			// tells whether the bomb ran and was held.
			t.Logf("the bomb's command answered %v", err)
		}
		// Polled often: the bomb's count swings as forks fail and shells
		// exit, and must be seen near the limit, never above it.
		limit := spec.Resources.PIDs
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			n := tc.Tasks(t, b.ID)
			if n > limit {
				t.Fatalf("%d tasks in a box limited to %d", n, limit)
			}
			if n >= limit-2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bomb never reached the limit (%d tasks)", n)
			}
		}
		if out, err := exec.Command("sh", "-c", "echo host-alive").Output(); err != nil || string(out) != "host-alive\n" {
			t.Fatalf("host cannot fork during the bomb: %v", err)
		}
		start := time.Now()
		if err := p.Delete(ctxFor(t, time.Minute), b.ID); err != nil {
			t.Fatalf("delete during a fork bomb: %v", err)
		}
		t.Logf("deleted a box at its pids limit in %s", time.Since(start))
		if lc, ok := h.(LeakChecker); ok {
			lc.CheckGone(t, b.ID)
		}
	})

	t.Run("MemoryHog", func(t *testing.T) {
		needLimits(t, h, sandbox.ResourceMemory)
		b := newBox(t)
		alive := func(t *testing.T) {
			t.Helper()
			if code, out, _ := shell(t, b, nil, "echo alive"); code != 0 || out != "alive\n" {
				t.Fatalf("execd did not survive: %d %q", code, out)
			}
		}
		// A process beyond the limit is killed inside the box.
		if code, _, _ := shell(t, b, nil, `python3 -c 'b = bytearray(1 << 30)'`); code != 137 {
			t.Fatalf("exit %d, want 137 (OOM kill)", code)
		}
		alive(t)
		// Memory-backed files count too: they fill their file system or
		// push the next allocation over the limit.
		hog := `head -c 400M /dev/zero > /dev/shm/fill; python3 -c 'b = bytearray(300 << 20)'`
		if code, _, errOut := shell(t, b, nil, hog); code != 137 && !strings.Contains(errOut, "No space left") {
			t.Fatalf("%s: exit %d (%q), want 137 (OOM kill) or ENOSPC", hog, code, errOut)
		}
		shell(t, b, nil, "rm -f /dev/shm/fill")
		alive(t)
		if info, err := p.Inspect(ctxFor(t, time.Minute), b.ID); err != nil || info.State != sandbox.StateRunning {
			t.Fatalf("after the OOM kills: %+v %v", info, err)
		}
	})

	t.Run("DiskFill", func(t *testing.T) {
		// The scratch file systems of every isolating backend that takes
		// a disk limit are bounded by it; where the backend claims the
		// limit, so is the rest of the box (root's home on its root file
		// system). A backend that does not claim it may refuse it.
		isolating(t, h)
		dirs := []string{"/workspace", "/tmp"}
		if diskClaimed {
			dirs = append(dirs, "/root")
		}
		dspec := spec
		dspec.Resources.DiskBytes = limitedResources.DiskBytes
		var b *Box
		if diskClaimed {
			b = NewBox(t, h, &dspec)
		} else {
			id := NewID()
			info, err := p.Create(ctxFor(t, time.Minute), id, dspec)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := p.Delete(ctx, id); err != nil {
					t.Errorf("delete box %s: %v", id, err)
				}
			})
			if sandbox.CodeOf(err) == sandbox.CodeCapability {
				t.Skipf("backend %s refuses a disk limit it does not enforce: %v", p.Name(), err)
			}
			if err != nil {
				t.Fatalf("create box: %v", err)
			}
			b = &Box{ID: id, Info: info, Client: Connect(p, info)}
			if err := b.Client.WaitReady(ctxFor(t, time.Minute)); err != nil {
				t.Fatalf("box %s: %v", id, err)
			}
		}
		for _, dir := range dirs {
			code, _, errOut := shell(t, b, nil, "head -c 200M /dev/zero > "+dir+"/fill")
			if code == 0 || !strings.Contains(errOut, "No space left") {
				t.Fatalf("%s: exit %d, stderr %q; want ENOSPC", dir, code, errOut)
			}
			shell(t, b, nil, "rm -f "+dir+"/fill")
		}
	})

	t.Run("MetricsReportTheLimits", func(t *testing.T) {
		needLimits(t, h, sandbox.ResourceMemory, sandbox.ResourceCPU)
		b := newBox(t)
		m, err := b.Client.Metrics(ctxFor(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if m.MemTotalMiB != 256 || m.CPUCount != 0.5 || m.MemUsedMiB <= 0 || m.MemUsedMiB >= 256 {
			t.Fatalf("metrics %+v, want 256 MiB total, 0.5 CPU and some usage below the total", m)
		}
		// The box's cgroups, where it sees them (v1, else v2), are
		// read-only to it.
		const write = `f=/sys/fs/cgroup/memory/memory.limit_in_bytes; test -e $f || f=/sys/fs/cgroup/memory.max; test -e $f && echo 1 > $f`
		if code, _, _ := shell(t, b, nil, write); code == 0 {
			t.Fatal("the box could change its own memory limit")
		}
	})
}

// testPause freezes and thaws a box where the backend offers pause, and
// checks the unsupported error where it does not.
func testPause(t *testing.T, h Harness) {
	p := h.Provider()
	b := NewBox(t, h, nil)
	ctx := ctxFor(t, 2*time.Minute)
	if !p.Capabilities().Pause {
		if err := p.Pause(ctx, b.ID); !errors.Is(err, sandbox.ErrUnsupported) {
			t.Fatalf("pause on a backend without pause: %v, want ErrUnsupported", err)
		}
		return
	}
	for range 2 { // the second pause and resume are no-ops
		if err := p.Pause(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := p.Inspect(ctx, b.ID); err != nil || info.State != sandbox.StatePaused {
		t.Fatalf("after pause: %+v %v", info, err)
	}
	for range 2 {
		if err := p.Resume(ctx, b.ID); err != nil {
			t.Fatal(err)
		}
	}
	if info, err := p.Inspect(ctx, b.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("after resume: %+v %v", info, err)
	}
	if code, _, _ := shell(t, b, nil, "true"); code != 0 {
		t.Fatal("box does not answer after resume")
	}
}
