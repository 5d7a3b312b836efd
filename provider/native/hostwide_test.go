package native_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// Items 3, 18, 29, 32 and 33 of the list of bad inputs, and the leftovers
// of a clean stop.

func TestEntrypointOutputIsBounded(t *testing.T) {
	h := newHarness(t)
	spec := h.Spec()
	spec.Entrypoint = []string{"/bin/sh", "-c", "echo first; exec yes astrabox-output-flood"}
	b := sandboxtest.NewBox(t, h, &spec)
	log := filepath.Join(h.dataDir, "boxes", b.ID, "init.log")
	// The entrypoint prints as fast as it can: the log on the host never
	// holds more than 64 KiB.
	deadline := time.Now().Add(2 * time.Second)
	var largest int64
	for time.Now().Before(deadline) {
		if fi, err := os.Stat(log); err == nil {
			largest = max(largest, fi.Size())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if largest > 64<<10 {
		t.Fatalf("the box's output log grew to %d bytes (bound: 64 KiB)", largest)
	}
	got, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(got), "astrabox-output-flood\n") || !strings.Contains(string(got), "older output was dropped") {
		t.Fatalf("the log holds neither the newest output nor the marker: %q", got[:min(len(got), 200)])
	}
	// No process of the box holds a host file as its output: the
	// entrypoint's stdout and stderr are a pipe, and no descriptor of
	// any box process names a host path.
	_, out, _ := sh(t, b, nil, "for p in /proc/[0-9]*; do [ $p = /proc/1 ] || ls -l $p/fd 2>/dev/null; done")
	if strings.Contains(out, h.dataDir) || strings.Contains(out, "init.log") {
		t.Fatalf("a box process holds a host file:\n%s", out)
	}
	code, out, _ := sh(t, b, nil, "readlink /proc/$(pgrep -x yes)/fd/1")
	if code != 0 || !strings.HasPrefix(out, "pipe:") {
		t.Fatalf("the entrypoint's stdout is %q (exit %d), want a pipe", out, code)
	}
	// Box root asking PID 1 for a stack dump gets nothing: the box runs on,
	// and init printed no dump.
	sh(t, b, nil, "kill -QUIT 1; kill -ABRT 1; sleep 0.5")
	if info, err := h.p.Inspect(ctx(t), b.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("after SIGQUIT and SIGABRT to init: %+v %v", info, err)
	}
	if got, _ := os.ReadFile(log); strings.Contains(string(got), "goroutine ") {
		t.Fatal("init printed a stack dump into the log")
	}
}

func TestDeadlineHoldsWithoutAServer(t *testing.T) {
	h := newHarness(t)
	spec := h.Spec()
	spec.Timeout = 2 * time.Second
	spec.Entrypoint = []string{"/bin/sh", "-c", "trap '' TERM; while :; do sleep 1; done"}
	expiring := sandboxtest.NewBox(t, h, &spec)
	renewed := sandboxtest.NewBox(t, h, &spec)
	paused := sandboxtest.NewBox(t, h, &spec)
	pausedDeadline := time.Now().Add(spec.Timeout)
	if err := h.p.Renew(ctx(t), renewed.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := h.p.Pause(ctx(t), paused.ID); err != nil {
		t.Fatal(err)
	}
	// No server watches the boxes (nothing calls Delete): the expiring box's
	// init kills everything in it at its deadline and exits.
	wait.Until(t, 15*time.Second, "the box is empty after its deadline", func() bool { return h.Tasks(t, expiring.ID) == 0 })
	if info, err := h.p.Inspect(ctx(t), expiring.ID); err != nil || info.State != sandbox.StateFailed || !strings.Contains(info.Reason, "deadline") {
		t.Fatalf("expired box: %+v %v", info, err)
	}
	if info, err := h.p.Inspect(ctx(t), renewed.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("renewed box after the first deadline: %+v %v", info, err)
	}
	// A backend started on the data dir later (a restarted server) removes
	// what is left of boxes past their deadline, a frozen one included,
	// and keeps the others.
	time.Sleep(time.Until(pausedDeadline))
	p2, err := native.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, expiring.ID)
	h.CheckGone(t, paused.ID)
	if info, err := p2.Inspect(ctx(t), renewed.ID); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("renewed box after a restart: %+v %v", info, err)
	}
}

// uidMap returns the uid map of the box's init, in one line.
func uidMap(t *testing.T, h *harness, id string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(boxPIDs(t, h, id)[0]), "uid_map"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func TestTwoServersOnOneHostKeepApart(t *testing.T) {
	testenv.NeedCommand(t, "iptables")
	testenv.NeedCommand(t, "ip")
	a := newHarness(t)
	b := newHarnessConfig(t, func(c *native.Config) { c.CgroupParent += "-b" })
	spec := a.Spec()
	spec.Network.Mode = sandbox.NetworkUnrestricted
	// Box ids are each server's own: both create the same ones, at once.
	ids := []string{"twin-" + strconv.Itoa(os.Getpid()), "twin2-" + strconv.Itoa(os.Getpid())}
	var wg sync.WaitGroup
	errs := make(chan error, 2*len(ids))
	for _, h := range []*harness{a, b} {
		for _, id := range ids {
			wg.Go(func() {
				if _, err := h.p.Create(ctx(t), id, spec); err != nil {
					errs <- err
				}
			})
			t.Cleanup(func() { _ = h.p.Delete(context.Background(), id) })
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, h := range []*harness{a, b} {
		for _, id := range ids {
			info, err := h.p.Inspect(ctx(t), id)
			if err != nil || info.State != sandbox.StateRunning {
				t.Fatalf("box %s of %s: %+v %v", id, h.dataDir, info, err)
			}
			// Each box still has its own link (a box of the other server
			// did not take it over) and address.
			box := &sandboxtest.Box{ID: id, Info: info, Client: sandboxtest.Connect(h.p, info)}
			code, out, errOut := sh(t, box, nil, "ip -4 -o addr show eth0 | awk '{print $4}'; cat /sys/class/net/eth0/iflink")
			f := strings.Fields(out)
			if code != 0 || len(f) != 2 {
				t.Fatalf("box %s of %s: address and link %q %q", id, h.dataDir, out, errOut)
			}
			who := h.dataDir + "/" + id
			for _, v := range []string{"uids " + uidMap(t, h, id), "address " + f[0], "interface " + hostIfByIndex(t, f[1])} {
				if other, dup := seen[v]; dup {
					t.Fatalf("%s and %s share %s", other, who, v)
				}
				seen[v] = who
			}
		}
	}
	// One server's deletes leave the other's boxes and links alone.
	for _, id := range ids {
		if err := a.p.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		a.CheckGone(t, id)
	}
	for _, id := range ids {
		if info, err := b.p.Inspect(ctx(t), id); err != nil || info.State != sandbox.StateRunning {
			t.Fatalf("box %s of the other server after the first's deletes: %+v %v", id, info, err)
		}
	}
	if list, err := a.p.List(ctx(t)); err != nil || len(list) != 0 {
		t.Fatalf("the first server lists %+v %v", list, err)
	}
}

// hostIfByIndex returns the name of the host interface with index idx.
func hostIfByIndex(t *testing.T, idx string) string {
	t.Helper()
	entries, _ := os.ReadDir("/sys/class/net")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("/sys/class/net", e.Name(), "ifindex")); err == nil && strings.TrimSpace(string(b)) == idx {
			return e.Name()
		}
	}
	t.Fatalf("no host interface with index %s", idx)
	return ""
}

// hostState is what a native backend may leave on the host: its mounts,
// its cgroups, its iptables rules and the files of its data dir.
type hostState struct {
	mounts, cgroups, rules, files []string
}

func captureHost(t *testing.T, dataDir, cgroup string) hostState {
	t.Helper()
	var s hostState
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dataDir) {
			s.mounts = append(s.mounts, f[4])
		}
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.Contains(path, cgroup) {
			s.cgroups = append(s.cgroups, path)
		}
		return nil
	})
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "ASTRABOX") || strings.Contains(line, "abx+") || strings.Contains(line, "abl+") {
				s.rules = append(s.rules, line)
			}
		}
	}
	_ = filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && path != dataDir {
			s.files = append(s.files, path)
		}
		return nil
	})
	return s
}

func TestCleanStopLeavesNothing(t *testing.T) {
	testenv.NeedCommand(t, "iptables-save")
	dir, err := os.MkdirTemp("", "astrabox-stoptest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cgroup := "astrabox-stoptest-" + strconv.Itoa(os.Getpid())
	before := captureHost(t, dir, cgroup)
	cfg := native.Config{DataDir: dir, Binary: testenv.AstraboxBinary(t), CgroupParent: cgroup}
	p, err := native.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{p: p, cfg: cfg, dataDir: dir, cgroup: cgroup}
	for _, mode := range []sandbox.NetworkMode{sandbox.NetworkUnrestricted, sandbox.NetworkNone} {
		spec := sandbox.Spec{Image: "host", Network: sandbox.NetworkPolicy{Mode: mode}}
		id := sandboxtest.NewID()
		if _, err := p.Create(ctx(t), id, spec); err != nil {
			t.Fatal(err)
		}
		if err := p.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		h.CheckGone(t, id)
	}
	// A box left running keeps what it needs across the stop.
	kept := sandboxtest.NewID()
	if _, err := p.Create(ctx(t), kept, sandbox.Spec{Image: "host"}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if mid := captureHost(t, dir, cgroup); len(mid.mounts) == 0 || len(mid.cgroups) == 0 {
		t.Fatalf("a stop with a box running released its binary or cgroups: %+v", mid)
	}
	p2, err := native.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := p2.Inspect(ctx(t), kept); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("the kept box after the restart: %+v %v", info, err)
	}
	if err := p2.Delete(ctx(t), kept); err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	after := captureHost(t, dir, cgroup)
	for _, c := range []struct {
		what          string
		before, after []string
	}{{"mounts", before.mounts, after.mounts}, {"cgroups", before.cgroups, after.cgroups}, {"files in the data dir", before.files, after.files}} {
		if !slices.Equal(c.before, c.after) {
			t.Errorf("%s: before %q, after %q", c.what, c.before, c.after)
		}
	}
	// The firewall is the host's, shared with every native backend: it
	// goes when no box of any of them is left.
	if others := otherSlots(t); others > 0 {
		t.Logf("iptables not compared: %d boxes of other data dirs run on this host", others)
	} else if !slices.Equal(before.rules, after.rules) {
		t.Errorf("iptables rules: before %q, after %q", before.rules, after.rules)
	}
}

// otherSlots counts the slots of the host's registry (boxes of any data
// dir).
func otherSlots(t *testing.T) int {
	t.Helper()
	entries, _ := os.ReadDir(native.DefaultSlotDir)
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			n++
		}
	}
	return n
}
