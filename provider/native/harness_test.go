package native_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// harness runs the conformance suite, and this package's own tests, on a
// native Provider with a fresh data dir and cgroup parent.
type harness struct {
	p        *native.Provider
	cfg      native.Config
	dataDir  string
	cgroup   string
	hostRoot string // the allowed root of host-path volumes
}

// HostPathRoot implements sandboxtest.HostPathRooter.
func (h *harness) HostPathRoot() string { return h.hostRoot }

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
	if n := h.slotsHeld(t, id); n > 0 {
		t.Errorf("%d uid slots of %s are left", n, id)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), id) {
		t.Errorf("a mount of %s is left on the host", id)
	}
}

// slotsHeld counts the slots of the host's registry that h's data dir
// holds for box id (any box when id is "").
func (h *harness) slotsHeld(t *testing.T, id string) int {
	t.Helper()
	slots, _ := os.ReadDir(native.DefaultSlotDir)
	n := 0
	for _, s := range slots {
		b, _ := os.ReadFile(filepath.Join(native.DefaultSlotDir, s.Name(), "owner"))
		dir, owner, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
		if dir == h.dataDir && (id == "" || owner == id) {
			n++
		}
	}
	return n
}

// Reopen implements sandboxtest.Reopener: a Provider on the same data dir
// and cgroup parent, as a restarted server makes. It is never closed: it
// holds nothing of its own (h.p's Close releases what is left).
func (h *harness) Reopen(t *testing.T) sandbox.Provider {
	p, err := native.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Orphan implements sandboxtest.Orphaner: the box's record goes, its
// init, cgroups, uid slot and directory stay.
func (h *harness) Orphan(t *testing.T, id string) {
	if err := os.Remove(filepath.Join(h.dataDir, "boxes", id, "state.json")); err != nil {
		t.Fatal(err)
	}
}

// Tasks implements sandboxtest.TaskCounter with the box's pids cgroup
// (cgroup v1, or the unified hierarchy).
func (h *harness) Tasks(t testing.TB, id string) int64 {
	t.Helper()
	var errs []error
	for _, dir := range []string{filepath.Join("/sys/fs/cgroup/pids", h.cgroup, id), filepath.Join("/sys/fs/cgroup", h.cgroup, id)} {
		b, err := os.ReadFile(filepath.Join(dir, "pids.current"))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil {
			t.Fatalf("pids.current of %s: %v", id, err)
		}
		return n
	}
	t.Fatalf("no pids cgroup for box %s: %v", id, errs)
	return 0
}

// Hardening implements sandboxtest.Hardened for boxes of the host image,
// whose /usr is the host's, read-only, and whose /etc is the box's own.
func (h *harness) Hardening() sandboxtest.Hardening {
	hd := h.boxHardening()
	hd.Denied = append(hd.Denied,
		sandboxtest.Probe{Name: "write read-only /usr", Command: "touch /usr/astrabox-probe"},
		sandboxtest.Probe{Name: "host /etc/shadow visible", Command: "test -e /etc/shadow"})
	return hd
}

// boxHardening is what every native box shows, whatever its image: the
// backend's own seccomp filter refuses adjtimex outright, it builds /dev
// itself, root keeps the box capability set, and no host path of the
// harness appears in mountinfo.
func (h *harness) boxHardening() sandboxtest.Hardening {
	return sandboxtest.Hardening{
		Syscalls: []sandboxtest.Syscall{{Name: "adjtimex", Nr: 159, Errno: 1}},
		Devices:  []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"},
		// CHOWN DAC_OVERRIDE FOWNER FSETID KILL SETGID SETUID SETPCAP
		// NET_BIND_SERVICE SYS_CHROOT AUDIT_WRITE SETFCAP.
		RootStatus: []string{"CapEff:\t00000000a00405fb", "CapPrm:\t00000000a00405fb"},
		HostPaths:  []string{h.dataDir, filepath.Dir(h.cfg.Binary), "/work", "/home"},
	}
}

func newHarness(t *testing.T) *harness {
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with an image store resolving image names.
func newHarnessWith(t *testing.T, images func(string) (string, error)) *harness {
	return newHarnessConfig(t, func(c *native.Config) { c.Images = images })
}

// newHarnessConfig is newHarness with the Config changed by adjust.
func newHarnessConfig(t *testing.T, adjust func(*native.Config)) *harness {
	testenv.NeedRoot(t)
	binary := testenv.AstraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-native-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cgroup := "astrabox-test-" + strconv.Itoa(os.Getpid())
	hostRoot, err := os.MkdirTemp("", "astrabox-hostpaths-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostRoot) })
	if hostRoot, err = filepath.EvalSymlinks(hostRoot); err != nil {
		t.Fatal(err)
	}
	cfg := native.Config{DataDir: dir, Binary: binary, CgroupParent: cgroup, HostPathRoots: []string{hostRoot}}
	adjust(&cfg)
	p, err := native.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
	})
	return &harness{p: p, cfg: cfg, dataDir: dir, cgroup: cfg.CgroupParent, hostRoot: hostRoot}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// sh runs a shell command in b as uid (nil: root) and returns exit code,
// stdout and stderr.
func sh(t *testing.T, b *sandboxtest.Box, uid *uint32, command string) (int, string, string) {
	t.Helper()
	ex, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: command, UID: uid})
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return ex.ExitCode, string(ex.Stdout), string(ex.Stderr)
}

func u32(v uint32) *uint32 { return &v }

// snapshotStore keeps snapshots in images, as `astrabox serve` wires it.
func snapshotStore(images *image.Store) *native.SnapshotStore {
	return &native.SnapshotStore{
		Derive: func(ctx context.Context, name, base string, upper int, uidBase uint32, maxBytes int64, labels map[string]string) error {
			_, err := images.Derive(ctx, name, base, upper, image.DeriveOptions{UIDBase: uidBase, MaxBytes: maxBytes, Labels: labels})
			return err
		},
		Labels: func(ctx context.Context) (map[string]map[string]string, error) {
			list, err := images.List(ctx)
			out := map[string]map[string]string{}
			for _, info := range list {
				if len(info.Labels) > 0 {
					out[info.Name] = info.Labels
				}
			}
			return out, err
		},
		Remove: images.Remove,
	}
}
