package native_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if builtPath != "" {
		os.RemoveAll(filepath.Dir(builtPath))
	}
	os.Exit(code)
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
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "freezer", ""} {
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

var (
	buildOnce sync.Once
	builtPath string
	buildErr  error
)

// astraboxBinary builds the astrabox binary (static, without the race
// detector) once per test run, so that boxes run what users run: the
// race-instrumented test binary needs several times the memory and
// threads, which the resource-limit tests would measure instead.
func astraboxBinary(t *testing.T) string {
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "astrabox-bin-")
		if err != nil {
			buildErr = err
			return
		}
		builtPath = filepath.Join(dir, "astrabox")
		cmd := exec.Command("go", "build", "-o", builtPath, "github.com/astrabox/astrabox/cmd/astrabox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v: %s", err, out)
		}
	})
	if buildErr != nil {
		testenv.Need(t, false, "building the astrabox binary ("+buildErr.Error()+")")
	}
	return builtPath
}

func newHarness(t *testing.T) *harness {
	testenv.NeedRoot(t)
	binary := astraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-native-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cgroup := "astrabox-test-" + strconv.Itoa(os.Getpid())
	p, err := native.New(native.Config{DataDir: dir, Binary: binary, CgroupParent: cgroup})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
	})
	return &harness{p: p, dataDir: dir, cgroup: cgroup}
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newHarness(t))
}
