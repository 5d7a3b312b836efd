package native_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/app"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestMain lets the test binary serve as the astrabox binary inside boxes:
// the backend runs it as `astrabox init`, and init runs it as `astrabox
// execd`.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "init" || os.Args[1] == "execd") {
		ctx, stop := app.SignalContext(context.Background())
		code := app.Main(ctx, os.Args[1:], app.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, app.OSEnv)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

type harness struct {
	p       *native.Provider
	dataDir string
	cgroup  string
}

func (h *harness) Provider() sandbox.Provider { return h.p }

// Spec leaves room for the suite's 1 GiB file: the writable layer is
// memory-backed and charged to the box's memory limit.
func (h *harness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 3 << 30, DiskBytes: 2 << 30}}
}

// CheckGone implements sandboxtest.LeakChecker.
func (h *harness) CheckGone(t *testing.T, id string) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(h.dataDir, "boxes", id)); !os.IsNotExist(err) {
		t.Errorf("box directory of %s is left: %v", id, err)
	}
	for _, c := range []string{"memory", "pids", "cpu", "freezer", ""} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", c, h.cgroup, id)); err == nil {
			t.Errorf("cgroup %s of %s is left", c, id)
		}
	}
	slots, _ := os.ReadDir(filepath.Join(h.dataDir, "slots"))
	for _, s := range slots {
		b, _ := os.ReadFile(filepath.Join(h.dataDir, "slots", s.Name(), "id"))
		if string(b) == id {
			t.Errorf("uid slot %s of %s is left", s.Name(), id)
		}
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), id) {
		t.Errorf("a mount of %s is left on the host", id)
	}
}

func newHarness(t *testing.T) *harness {
	testenv.NeedRoot(t)
	dir, err := os.MkdirTemp("", "astrabox-native-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = unix.Unmount(filepath.Join(dir, "bin"), unix.MNT_DETACH)
		os.RemoveAll(dir)
	})
	cgroup := "astrabox-test-" + strconv.Itoa(os.Getpid())
	p, err := native.New(native.Config{DataDir: dir, Binary: os.Args[0], CgroupParent: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, c := range []string{"memory", "pids", "cpu", "freezer", ""} {
			_ = os.Remove(filepath.Join("/sys/fs/cgroup", c, cgroup))
		}
	})
	return &harness{p: p, dataDir: dir, cgroup: cgroup}
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newHarness(t))
}
