package native_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

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

func newHarness(t *testing.T) *harness {
	return newHarnessWith(t, nil)
}

// newHarnessWith is newHarness with an image store resolving image names.
func newHarnessWith(t *testing.T, images func(string) (string, error)) *harness {
	testenv.NeedRoot(t)
	binary := testenv.AstraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-native-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cgroup := "astrabox-test-" + strconv.Itoa(os.Getpid())
	p, err := native.New(native.Config{DataDir: dir, Binary: binary, CgroupParent: cgroup, Images: images})
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

// debianImage is the name the Debian test image is imported under.
const debianImage = "debian:12"

// debianHarness is a harness whose boxes run a real distribution: the
// rootfs tarball named by ASTRABOX_TEST_ROOTFS (CI builds it with
// image/debootstrap.sh), imported into a fresh image store.
type debianHarness struct {
	*harness
	resolve func(string) (string, error) // image name -> its root on the host
}

func (h debianHarness) Spec() sandbox.Spec {
	s := h.harness.Spec()
	s.Image = debianImage
	return s
}

func newDebianHarness(t *testing.T) debianHarness {
	testenv.NeedRoot(t)
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
	dir, err := os.MkdirTemp("", "astrabox-images-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	store, err := image.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Import(t.Context(), debianImage, rootfs, image.ImportOptions{}); err != nil {
		t.Fatalf("import %s: %v", rootfs, err)
	}
	return debianHarness{newHarnessWith(t, store.Resolve), store.Resolve}
}

// TestConformanceDebian runs the suite in boxes of an imported image: an
// overlay whose lower layer is the image, shared read-only and idmapped.
func TestConformanceDebian(t *testing.T) {
	sandboxtest.Run(t, newDebianHarness(t))
}

// TestImportedImageIsSharedAndCopiedUp checks the imported image's layer:
// its files are the box root's, a box's change goes to its own layer, and
// neither the image nor another box sees it.
func TestImportedImageIsSharedAndCopiedUp(t *testing.T) {
	h := newDebianHarness(t)
	a := sandboxtest.NewBox(t, h, nil)
	b := sandboxtest.NewBox(t, h, nil)
	if _, out, _ := sh(t, a, nil, "stat -c %u:%g /etc/passwd /usr/bin/python3 /root"); strings.Fields(out)[0] != "0:0" || len(slices.Compact(strings.Fields(out))) != 1 {
		t.Fatalf("image files are owned by %q in the box, want the box's root (0:0)", out)
	}
	if code, _, errOut := sh(t, a, nil, "echo 'intruder:x:0:0::/:/bin/sh' >> /etc/passwd && useradd -m agent && id agent"); code != 0 {
		t.Fatalf("root in the box cannot change its image files: %s", errOut)
	}
	if code, _, _ := sh(t, b, nil, "grep -q intruder /etc/passwd || id agent"); code == 0 {
		t.Fatal("box b sees box a's change to the image")
	}
	if code, _, _ := sh(t, a, u32(1000), "echo x >> /etc/passwd"); code == 0 {
		t.Fatal("a non-root user in the box could write /etc/passwd")
	}
	root, err := h.resolve(debianImage)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc", "passwd")); err != nil || strings.Contains(string(b), "intruder") {
		t.Fatalf("the image on the host changed: %v", err)
	}
	// The shared lower layer stays out of the box's reach: its mount was
	// left behind with the old root.
	if code, out, _ := sh(t, a, nil, "test -e /.lower || grep ' /.lower ' /proc/self/mountinfo"); code == 0 {
		t.Fatalf("the image's lower layer is reachable in the box: %q", out)
	}
}
