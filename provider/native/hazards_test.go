package native_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// Items 4, 5, 9, 24 and 26 of the list of bad inputs.

// cpuSeconds returns the CPU time the box's cgroup has used (v1 cpuacct
// or v2 cpu.stat).
func cpuSeconds(t *testing.T, h *harness, id string) float64 {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuacct", h.cgroup, id, "cpuacct.usage")); err == nil {
		ns, _ := strconv.ParseFloat(strings.TrimSpace(string(b)), 64)
		return ns / 1e9
	}
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", h.cgroup, id, "cpu.stat"))
	if err != nil {
		t.Fatalf("no CPU accounting for box %s: %v", id, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			us, _ := strconv.ParseFloat(v, 64)
			return us / 1e6
		}
	}
	t.Fatalf("cpu.stat of %s has no usage_usec", id)
	return 0
}

// boxPIDs returns the host pids in the box's cgroup.
func boxPIDs(t *testing.T, h *harness, id string) []int {
	t.Helper()
	var out []int
	for _, f := range []string{filepath.Join("/sys/fs/cgroup/pids", h.cgroup, id, "cgroup.procs"), filepath.Join("/sys/fs/cgroup", h.cgroup, id, "cgroup.procs")} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(l); err == nil {
				out = append(out, pid)
			}
		}
		return out
	}
	t.Fatalf("no cgroup.procs for box %s", id)
	return nil
}

func TestSecurityCPUAndStubbornProcesses(t *testing.T) {
	h := newHarness(t)
	spec := sandbox.Spec{Image: "host", Resources: sandbox.Resources{MilliCPU: 500}}
	b := sandboxtest.NewBox(t, h, &spec)

	// Four spinning processes on a box of half a core: the quota holds
	// (unthrottled they would use every core of the host).
	sh(t, b, nil, "for i in 1 2 3 4; do (while :; do :; done) > /dev/null 2>&1 & done; echo spinning")
	before, start := cpuSeconds(t, h, b.ID), time.Now()
	time.Sleep(2 * time.Second)
	used := (cpuSeconds(t, h, b.ID) - before) / time.Since(start).Seconds()
	if used > 0.5*1.3 {
		t.Fatalf("a box limited to 0.5 CPU used %.2f CPUs", used)
	}
	t.Logf("a box limited to 0.5 CPU used %.2f CPUs while spinning on 4 processes", used)

	// Processes that ignore SIGTERM, detached from execd, still die with
	// the box: every host pid of its cgroup is gone after Delete.
	sh(t, b, nil, `for i in 1 2 3; do setsid sh -c 'trap "" TERM HUP INT; while :; do sleep 1; done' > /dev/null 2>&1 & done; echo started`)
	type proc struct {
		pid   int
		start uint64
	}
	var procs []proc
	for _, pid := range boxPIDs(t, h, b.ID) {
		procs = append(procs, proc{pid, procfs.StartTime(pid)})
	}
	if len(procs) < 8 { // init, 4 spinners, 3 stubborn shells (and their sleeps)
		t.Fatalf("only %d processes in the box's cgroup", len(procs))
	}
	if err := h.p.Delete(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	for _, p := range procs {
		if st := procfs.StartTime(p.pid); st != 0 && st == p.start {
			t.Errorf("process %d of the deleted box is still running", p.pid)
		}
	}
	h.CheckGone(t, b.ID)
}

func TestSecurityExecdBounds(t *testing.T) {
	h := newHarness(t)
	b := sandboxtest.NewBox(t, h, nil)

	t.Run("fd exhaustion", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, `python3 -c '
fs = []
try:
    while True: fs.append(open("/dev/null"))
except OSError as e: print(len(fs), e.errno)'`)
		f := strings.Fields(out)
		if len(f) != 2 || f[1] != "24" { // EMFILE
			t.Fatalf("opening files without end: %q, want EMFILE", out)
		}
		if n, _ := strconv.Atoi(f[0]); n > 1<<16 {
			t.Fatalf("a process opened %d files", n)
		}
	})

	t.Run("huge argv and env", func(t *testing.T) {
		huge := strings.Repeat("a", 4<<20)
		ex, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "echo " + huge + " | wc -c"})
		if err == nil && ex.ExitCode == 0 {
			t.Fatalf("a 4 MiB command line ran: %+v", ex.Stdout)
		}
		code, out, _ := sh(t, b, nil, "X=$(head -c 3000000 /dev/zero | tr '\\0' a) env > /dev/null; echo survived")
		if code != 0 || out != "survived\n" {
			t.Fatalf("a huge environment: %d %q", code, out)
		}
	})

	t.Run("output flood stays bounded", func(t *testing.T) {
		// 512 MiB of output nobody reads: execd keeps only the newest bytes
		// of each stream and says how many it dropped.
		ex, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "head -c 512M /dev/zero | tr '\\0' x; echo; echo end", Background: true})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(90 * time.Second)
		for {
			st, err := b.Client.Status(ctx(t), ex.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Running {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the flood did not end")
			}
			time.Sleep(50 * time.Millisecond)
		}
		data, _, lost, err := b.Client.Logs(ctx(t), ex.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if lost == 0 || !strings.HasSuffix(string(data), "\nend\n") || len(data) > 16<<20 {
			t.Fatalf("logs after a flood: %d bytes kept, %d lost", len(data), lost)
		}
		_, status, _ := sh(t, b, nil, "grep VmHWM /proc/1/status")
		f := strings.Fields(status)
		if kb, _ := strconv.Atoi(f[len(f)-2]); len(f) < 3 || kb > 128<<10 {
			t.Fatalf("execd's peak memory after a 512 MiB flood: %q", status)
		}
	})
}

func TestSecurityNoTracingOutside(t *testing.T) {
	h := newHarness(t)
	b := sandboxtest.NewBox(t, h, nil)
	// Nothing outside the box is visible, and its init cannot be traced or
	// read, even by the box's root.
	if _, out, _ := sh(t, b, nil, "ls -d /proc/[0-9]* | wc -l"); strings.TrimSpace(out) == "" || len(strings.TrimSpace(out)) > 1 {
		t.Fatalf("the box sees %s processes", out)
	}
	_, out, _ := sh(t, b, nil, `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, 1, 0, 0)  # PTRACE_ATTACH to init
print(r, ctypes.get_errno())
class iovec(ctypes.Structure): _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
buf = ctypes.create_string_buffer(8)
local = iovec(ctypes.cast(buf, ctypes.c_void_p), 8); remote = iovec(0x400000, 8)
r = libc.process_vm_readv(1, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
print(r, ctypes.get_errno())'`)
	if f := strings.Fields(out); len(f) != 4 || f[0] != "-1" || f[2] != "-1" {
		t.Fatalf("ptrace and process_vm_readv of init: %q, want both refused", out)
	}
	if code, _, _ := sh(t, b, nil, "cat /proc/1/environ > /dev/null"); code == 0 {
		t.Fatal("the box can read init's environment")
	}
}

func TestManyBoxesAtOnce(t *testing.T) {
	h := newHarness(t)
	const n = 100
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ids  []string
		errs []error
	)
	spec := sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 64 << 20, DiskBytes: 16 << 20}}
	for range n {
		wg.Go(func() {
			id := sandboxtest.NewID()
			_, err := h.p.Create(ctx(t), id, spec)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			ids = append(ids, id)
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, id := range ids {
			_ = h.p.Delete(context.Background(), id)
		}
	})
	if len(errs) > 0 {
		t.Fatalf("%d of %d creates failed; first: %v", len(errs), n, errs[0])
	}
	// No two boxes share a uid range.
	seen := map[string]string{}
	for _, id := range ids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(boxPIDs(t, h, id)[0]), "uid_map"))
		if err != nil {
			t.Fatal(err)
		}
		m := strings.Join(strings.Fields(string(b)), " ")
		if other, dup := seen[m]; dup {
			t.Fatalf("boxes %s and %s share the uid range %s", id, other, m)
		}
		seen[m] = id
	}
	for _, id := range ids {
		if err := h.p.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		h.CheckGone(t, id)
	}
}

func TestCreateDeleteCyclesLeakNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 cycles; skipped with -short")
	}
	h := newHarness(t)
	mountsBefore := countMounts(t, h.dataDir)
	for i := range 1000 {
		id := fmt.Sprintf("cycle%d", i)
		if _, err := h.p.Create(ctx(t), id, h.Spec()); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if err := h.p.Delete(ctx(t), id); err != nil {
			t.Fatalf("cycle %d: %v", i, err)
		}
		if i%100 == 0 {
			h.CheckGone(t, id)
		}
	}
	if after := countMounts(t, h.dataDir); after != mountsBefore {
		t.Fatalf("host mounts under the data dir: %d before 1,000 cycles, %d after", mountsBefore, after)
	}
	if entries, _ := os.ReadDir(filepath.Join(h.dataDir, "boxes")); len(entries) != 0 {
		t.Fatalf("%d box directories left", len(entries))
	}
	if n := h.slotsHeld(t, ""); n != 0 {
		t.Fatalf("%d uid slots left", n)
	}
	if list, err := h.p.List(ctx(t)); err != nil || len(list) != 0 {
		t.Fatalf("List after the cycles: %v %v", list, err)
	}
}

// countMounts counts the host's mounts under dir (other tests running
// at the same time mount and unmount elsewhere).
func countMounts(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			n++
		}
	}
	return n
}
