package docker_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// Environment of the tests that need an engine.
const (
	// envRootfs names a root file system tarball (optionally compressed)
	// with bash, coreutils and python3, such as a Debian bookworm rootfs;
	// the tests import it into the engine.
	envRootfs = "ASTRABOX_TEST_ROOTFS"
	// envImage names an image the engine already holds to use instead.
	envImage = "ASTRABOX_TEST_DOCKER_IMAGE"
)

// harness runs the conformance suite, and this package's own tests, on a
// docker Provider with a fresh data dir and owner label.
type harness struct {
	p       *docker.Provider
	cfg     docker.Config
	image   string
	engine  *client.Client
	dataDir string
	// hostRoot is the allowed root of host-path volumes.
	hostRoot string

	mu        sync.Mutex
	reopened  []*docker.Provider // by Reopen; closed before p
	pidsFiles map[string]string  // box id -> its pids.current on the host
}

func (h *harness) Provider() sandbox.Provider { return h.p }

// HostPathRoot implements sandboxtest.HostPathRooter.
func (h *harness) HostPathRoot() string { return h.hostRoot }

// Spec leaves room for the suite's 1 GiB file: /workspace is a tmpfs,
// charged to the box's memory limit, of the backend's default disk size
// (the harness sets 2 GiB; a Spec may not name a disk limit, which the
// backend does not enforce on the writable layer).
func (h *harness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: h.image, Resources: sandbox.Resources{MemoryBytes: 3 << 30}}
}

// CheckGone implements sandboxtest.LeakChecker: no container or network
// labelled with the id, no box directory and no host mount of it remain.
func (h *harness) CheckGone(t *testing.T, id string) {
	t.Helper()
	ctx := ctx(t)
	filter := make(client.Filters).Add("label", "io.astrabox.sandbox-id="+id)
	cs, err := h.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		t.Errorf("container %s of %s is left (%s)", c.ID[:12], id, c.State)
	}
	ns, err := h.engine.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		t.Errorf("network %s of %s is left", n.Name, id)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "boxes", id)); !os.IsNotExist(err) {
		t.Errorf("box directory of %s is left: %v", id, err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), id) {
		t.Errorf("a mount of %s is left on the host", id)
	}
}

// Reopen implements sandboxtest.Reopener: a Provider on the same data dir,
// engine and owner, as a restarted server makes. The harness closes it
// before h.p, when the test that made the harness ends: closing it earlier
// would release the binary that h.p's boxes are given.
func (h *harness) Reopen(t *testing.T) sandbox.Provider {
	p, err := docker.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reopened = append(h.reopened, p)
	return p
}

// Orphan implements sandboxtest.Orphaner: a crash that lost the box's
// record leaves its container.
func (h *harness) Orphan(t *testing.T, id string) {
	if err := os.Remove(filepath.Join(h.dataDir, "boxes", id, "state.json")); err != nil {
		t.Fatal(err)
	}
}

// Tasks implements sandboxtest.TaskCounter with the container's pids
// cgroup, found once per box.
func (h *harness) Tasks(t testing.TB, id string) int64 {
	t.Helper()
	h.mu.Lock()
	path, ok := h.pidsFiles[id]
	h.mu.Unlock()
	if !ok {
		path = h.cgroupFile(t, id, "pids", "pids.current")
		h.mu.Lock()
		h.pidsFiles[id] = path
		h.mu.Unlock()
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("tasks of %s: %v", id, err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatalf("tasks of %s: %v", id, err)
	}
	return n
}

// capMask is the capability set a box's root keeps: CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP and NET_BIND_SERVICE.
const capMask = "00000000000005fb"

// Hardening implements sandboxtest.Hardened: root keeps capMask, bounding
// set included, and neither the data dir nor the binary's directory shows
// in a box.
func (h *harness) Hardening() sandboxtest.Hardening {
	return sandboxtest.Hardening{
		RootStatus: []string{"CapEff:\t" + capMask, "CapBnd:\t" + capMask},
		HostPaths:  []string{h.dataDir, filepath.Dir(h.cfg.Binary)},
	}
}

// checkOwnerGone checks that, once its boxes are deleted and the
// Provider closed, nothing the backend made is left: no container or
// network with its owner label, no host rule for its bridges.
func (h *harness) checkOwnerGone(t *testing.T) {
	t.Helper()
	ctx := ctx(t)
	filter := make(client.Filters).Add("label", "io.astrabox.owner="+h.cfg.Owner)
	cs, err := h.engine.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		t.Errorf("container %s (%v) is left", c.ID[:12], c.Labels)
	}
	ns, err := h.engine.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		t.Errorf("network %s is left", n.Name)
	}
	// Named volumes outlive boxes by design: the suite's go with it.
	vs, err := h.engine.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Items {
		if _, err := h.engine.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{}); err != nil {
			t.Errorf("remove volume %s: %v", v.Name, err)
		}
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		for _, bridge := range []string{h.p.NetworkBridge(), h.p.LimitedBridge()} {
			if strings.Contains(string(out), bridge) {
				t.Errorf("host rules for bridge %s are left", bridge)
			}
		}
	}
}

var (
	imageMu sync.Mutex
	image   string
)

// testImage returns the image boxes run: envImage, or the tarball named
// by envRootfs imported with p (once; the engine keeps it under a tag
// derived from the file, so later runs reuse it).
func testImage(t *testing.T, p *docker.Provider, engine *client.Client) string {
	imageMu.Lock()
	defer imageMu.Unlock()
	if image != "" {
		return image
	}
	if name := os.Getenv(envImage); name != "" {
		image = name
		return image
	}
	path := os.Getenv(envRootfs)
	testenv.Need(t, path != "", envRootfs+" (a rootfs tarball with bash and python3)")
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("%s: %v", envRootfs, err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %d %d", path, fi.Size(), fi.ModTime().UnixNano()))
	name := "astrabox-test/rootfs:" + hex.EncodeToString(sum[:6])
	if _, err := engine.ImageInspect(ctx(t), name); err == nil {
		image = name
		return image
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := p.ImportRootfs(ctx(t), name, f); err != nil {
		t.Fatalf("import %s: %v", path, err)
	}
	image = name
	return image
}

// newHarness returns a harness on a fresh data dir; adjust changes the
// Config before the Provider is made.
func newHarness(t *testing.T, adjust func(*docker.Config)) *harness {
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	binary := testenv.AstraboxBinary(t)
	dir, err := os.MkdirTemp("", "astrabox-docker-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	hostRoot, err := os.MkdirTemp("", "astrabox-hostpaths-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hostRoot) })
	if hostRoot, err = filepath.EvalSymlinks(hostRoot); err != nil {
		t.Fatal(err)
	}
	cfg := docker.Config{DataDir: dir, Binary: binary, Owner: "astrabox-test-" + sandboxtest.NewID(), HostPathRoots: []string{hostRoot},
		Defaults: sandbox.Resources{DiskBytes: 2 << 30}}
	if adjust != nil {
		adjust(&cfg)
	}
	p, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	engine, err := client.New()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{p: p, cfg: cfg, engine: engine, dataDir: dir, hostRoot: hostRoot, pidsFiles: map[string]string{}}
	t.Cleanup(func() {
		defer engine.Close()
		for _, p2 := range h.reopened {
			if err := p2.Close(); err != nil {
				t.Errorf("close reopened provider: %v", err)
			}
		}
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
		h.checkOwnerGone(t)
	})
	h.image = testImage(t, p, engine)
	return h
}

// containerOf returns the engine's view of box id's container.
func (h *harness) containerOf(t testing.TB, id string) client.ContainerInspectResult {
	t.Helper()
	filter := make(client.Filters).Add("label", "io.astrabox.sandbox-id="+id)
	cs, err := h.engine.ContainerList(ctx(t), client.ContainerListOptions{All: true, Filters: filter})
	if err != nil || len(cs.Items) != 1 {
		t.Fatalf("container of %s: %v (%d found)", id, err, len(cs.Items))
	}
	res, err := h.engine.ContainerInspect(ctx(t), cs.Items[0].ID, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) || err != nil {
		t.Fatalf("inspect container of %s: %v", id, err)
	}
	return res
}

// cgroupFile is the host path of file in controller's cgroup of box id
// (cgroup v1, or the unified hierarchy when controller is absent).
func (h *harness) cgroupFile(t testing.TB, id, controller, file string) string {
	t.Helper()
	pid := h.containerOf(t, id).Container.State.Pid
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unified := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", controller, parts[2], file)
			}
		}
		if parts[0] == "0" {
			unified = parts[2]
		}
	}
	return filepath.Join("/sys/fs/cgroup", unified, file)
}

func ctx(t testing.TB) context.Context {
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
