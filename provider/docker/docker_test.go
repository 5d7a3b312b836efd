package docker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

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

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type harness struct {
	p       *docker.Provider
	cfg     docker.Config
	image   string
	engine  *client.Client
	dataDir string
}

func (h *harness) Provider() sandbox.Provider { return h.p }

// Spec leaves room for the suite's 1 GiB file: /workspace is a tmpfs,
// charged to the box's memory limit.
func (h *harness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: h.image, Resources: sandbox.Resources{MemoryBytes: 3 << 30, DiskBytes: 2 << 30}}
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

// checkOwnerGone checks that, once its boxes are deleted and the
// Provider closed, nothing the backend made is left: no container or
// network with its owner label, no host rule for its bridge.
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
	if out, err := exec.Command("iptables", "-w", "-S").Output(); err == nil && strings.Contains(string(out), h.p.NetworkBridge()) {
		t.Errorf("host rules for bridge %s are left", h.p.NetworkBridge())
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
	cfg := docker.Config{DataDir: dir, Binary: binary, Owner: "astrabox-test-" + sandboxtest.NewID()}
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
	h := &harness{p: p, cfg: cfg, engine: engine, dataDir: dir}
	t.Cleanup(func() {
		defer engine.Close()
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
		h.checkOwnerGone(t)
	})
	h.image = testImage(t, p, engine)
	return h
}

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newHarness(t, nil))
}

func TestRestartReattaches(t *testing.T) {
	h := newHarness(t, nil)
	id := sandboxtest.NewID()
	info, err := h.p.Create(ctx(t), id, h.Spec())
	if err != nil {
		t.Fatal(err)
	}
	b := &sandboxtest.Box{ID: id, Info: info, Client: sandboxtest.Connect(h.p, info)}
	if _, out, _ := sh(t, b, nil, "echo before > /workspace/mark; cat /workspace/mark"); out != "before\n" {
		t.Fatalf("first provider: %q", out)
	}

	// A new Provider on the same data dir knows nothing but what is on
	// disk and in the engine.
	p2, err := docker.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	got, err := p2.Inspect(ctx(t), id)
	if err != nil || got.State != sandbox.StateRunning || got.AccessToken != info.AccessToken {
		t.Fatalf("inspect from a new provider: %+v, %v", got, err)
	}
	list, err := p2.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !containsID(list, id, sandbox.StateRunning) {
		t.Fatalf("the new provider does not list %s running: %+v", id, list)
	}
	b2 := &sandboxtest.Box{ID: id, Info: got, Client: sandboxtest.Connect(p2, got)}
	if _, out, _ := sh(t, b2, nil, "cat /workspace/mark"); out != "before\n" {
		t.Fatalf("through the new provider: %q", out)
	}
	if err := p2.Delete(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	if _, err := h.p.Inspect(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("the first provider still sees the box: %v", err)
	}
	h.CheckGone(t, id)
}

func TestUnknownImage(t *testing.T) {
	h := newHarness(t, nil)
	noPull := newHarness(t, func(c *docker.Config) { c.NoPull = true })
	for _, tt := range []struct {
		name string
		h    *harness
		ref  string
	}{
		{"pull fails", h, "127.0.0.1:1/astrabox/missing:1"}, // a registry that is not there
		{"pulling is off", noPull, "astrabox-test/missing:1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.h
			id := sandboxtest.NewID()
			_, err := h.p.Create(ctx(t), id, sandbox.Spec{Image: tt.ref})
			if code := sandbox.CodeOf(err); code != sandbox.CodeImageNotFound {
				t.Fatalf("create: %v (code %s), want %s", err, code, sandbox.CodeImageNotFound)
			}
			if _, err := h.p.Inspect(ctx(t), id); !errors.Is(err, sandbox.ErrNotFound) {
				t.Fatalf("inspect after a failed create: %v", err)
			}
			h.CheckGone(t, id)
		})
	}
	t.Run("invalid reference", func(t *testing.T) {
		_, err := h.p.Create(ctx(t), sandboxtest.NewID(), sandbox.Spec{Image: "Not A Reference"})
		if code := sandbox.CodeOf(err); code != sandbox.CodeInvalidRequest {
			t.Fatalf("create: %v, want %s", err, sandbox.CodeInvalidRequest)
		}
	})
}

func TestEntrypoint(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.Spec()
	spec.Env = map[string]string{"GREETING": "hello from the entrypoint"}
	spec.Entrypoint = []string{"/bin/sh", "-c", `echo "$GREETING in $PWD" > /workspace/started; exec sleep 100000`}
	b := sandboxtest.NewBox(t, h, &spec)
	eventually(t, "the entrypoint to run", func() bool {
		code, _, _ := sh(t, b, nil, "test -s /workspace/started")
		return code == 0
	})
	if _, out, _ := sh(t, b, nil, "cat /workspace/started; grep -qx sleep /proc/[0-9]*/comm && echo sleeping"); out != "hello from the entrypoint in /workspace\nsleeping\n" {
		t.Fatalf("entrypoint: %q", out)
	}

	t.Run("missing program", func(t *testing.T) {
		spec := h.Spec()
		spec.Entrypoint = []string{"/no/such/program"}
		id := sandboxtest.NewID()
		_, err := h.p.Create(ctx(t), id, spec)
		if code := sandbox.CodeOf(err); code != sandbox.CodeInvalidRequest {
			t.Fatalf("create: %v, want %s", err, sandbox.CodeInvalidRequest)
		}
		h.CheckGone(t, id)
	})
}

func TestInjectByCopy(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) { c.InjectByCopy = true })
	b := sandboxtest.NewBox(t, h, nil)
	code, out, _ := sh(t, b, nil, "test -x /.astrabox/astrabox && grep -c ' /.astrabox/astrabox ' /proc/self/mountinfo")
	if code == 0 || strings.TrimSpace(out) != "0" {
		t.Fatalf("the binary is not a copy in the container: exit %d, %q", code, out)
	}
}

// TestRemoteEngine drives the local engine as if it were remote: the
// binary and token are copied in, execd is reached through a published
// port, and network none is refused.
func TestRemoteEngine(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) {
		c.Remote, c.EgressFiltered, c.PublishIP = true, true, "127.0.0.1"
	})
	caps := h.p.Capabilities()
	if caps.Has(sandbox.CapNetworkUnrestricted) == false || len(caps.NetworkModes) != 1 {
		t.Fatalf("remote capabilities: %+v", caps)
	}
	_, err := h.p.Create(ctx(t), sandboxtest.NewID(), h.Spec())
	if code := sandbox.CodeOf(err); code != sandbox.CodeCapability {
		t.Fatalf("network none on a remote engine: %v, want %s", err, sandbox.CodeCapability)
	}
	spec := h.Spec()
	spec.Network.Mode = sandbox.NetworkUnrestricted
	b := sandboxtest.NewBox(t, h, &spec)
	if code, out, errOut := sh(t, b, nil, "test -s /.astrabox/token && test -x /.astrabox/astrabox && echo ok"); code != 0 || out != "ok\n" {
		t.Fatalf("copied files: exit %d %q %q", code, out, errOut)
	}
	p2, err := docker.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if err := sandboxtest.Connect(p2, b.Info).WaitReady(ctx(t)); err != nil {
		t.Fatalf("a new provider cannot reach the box: %v", err)
	}
}

func TestOrphansAreListedAndRemoved(t *testing.T) {
	h := newHarness(t, nil)
	id := sandboxtest.NewID()
	if _, err := h.p.Create(ctx(t), id, h.Spec()); err != nil {
		t.Fatal(err)
	}
	// A crash that lost the box's record leaves its container.
	if err := os.Remove(filepath.Join(h.dataDir, "boxes", id, "state.json")); err != nil {
		t.Fatal(err)
	}
	list, err := h.p.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !containsID(list, id, sandbox.StateFailed) {
		t.Fatalf("List does not show the orphan %s as failed: %+v", id, list)
	}
	if err := h.p.Delete(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, id)
}

func TestCapabilitiesFollowTheConfig(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		runtime string
		want    sandbox.Isolation
	}{
		{"", sandbox.IsolationContainer}, {"runc", sandbox.IsolationContainer},
		{"runsc", sandbox.IsolationSandboxed}, {"kata-runtime", sandbox.IsolationVM},
		{"io.containerd.kata.v2", sandbox.IsolationVM},
	}
	for _, tt := range tests {
		p, err := docker.New(docker.Config{DataDir: dir, Binary: "/nonexistent", InjectByCopy: true, Runtime: tt.runtime})
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Capabilities().Isolation; got != tt.want {
			t.Errorf("runtime %q: isolation %s, want %s", tt.runtime, got, tt.want)
		}
		p.Close()
	}
	if _, err := docker.New(docker.Config{DataDir: dir, InjectByCopy: true, Runtime: "mystery"}); err == nil {
		t.Error("an unknown runtime without Isolation was accepted")
	}
	p, err := docker.New(docker.Config{DataDir: dir, InjectByCopy: true, Iptables: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := p.Capabilities()
	if c.Has(sandbox.CapNetworkUnrestricted) || c.Has(sandbox.CapNetworkLimited) || len(c.NetworkModes) != 1 {
		t.Errorf("without iptables the backend claims %v", c.NetworkModes)
	}
	for _, r := range c.Limits {
		if r == sandbox.ResourceDisk {
			t.Error("disk limit claimed although the writable layer is unbounded")
		}
	}
}

func TestHealth(t *testing.T) {
	p, err := docker.New(docker.Config{DataDir: t.TempDir(), InjectByCopy: true, Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if h := p.Health(ctx(t)); h.Status != sandbox.Undetected {
		t.Fatalf("no socket: %+v", h)
	}
	testenv.NeedDocker(t)
	testenv.NeedRoot(t)
	p2, err := docker.New(docker.Config{DataDir: t.TempDir(), InjectByCopy: true})
	if err != nil {
		t.Fatal(err)
	}
	defer p2.Close()
	if h := p2.Health(ctx(t)); h.Status != sandbox.Healthy {
		t.Fatalf("health: %+v", h)
	}
	t.Logf("engine API version %s", p2.APIVersion())
}

func containsID(list []sandbox.Info, id string, state sandbox.State) bool {
	for _, i := range list {
		if i.ID == id && i.State == state {
			return true
		}
	}
	return false
}

// containerOf returns the engine's view of box id's container.
func (h *harness) containerOf(t *testing.T, id string) client.ContainerInspectResult {
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

func TestInvalidIDs(t *testing.T) {
	p, err := docker.New(docker.Config{DataDir: t.TempDir(), InjectByCopy: true, Host: "unix:///nonexistent/docker.sock"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, id := range []string{"", "../etc", "a/b", "-x", "_x", "a\x00b", "a\nb", "a.b", strings.Repeat("a", 65)} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			_, err := p.Create(ctx(t), id, sandbox.Spec{Image: "x"})
			errs := []error{err}
			_, err = p.Inspect(ctx(t), id)
			errs = append(errs, err, p.Delete(ctx(t), id), p.Pause(ctx(t), id))
			_, err = p.Dial(ctx(t), id)
			errs = append(errs, err)
			for i, err := range errs {
				if code := sandbox.CodeOf(err); code != sandbox.CodeInvalidRequest {
					t.Errorf("call %d: %v (code %s), want %s", i, err, code, sandbox.CodeInvalidRequest)
				}
			}
		})
	}
}

// TestRuntimeChosenByProfile: a Spec may name one of the runtimes the
// backend offers, which the container then runs under; any other is
// refused before anything is made.
func TestRuntimeChosenByProfile(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) { c.Runtimes = []string{"runc", "runsc"} })
	caps := h.p.Capabilities()
	if len(caps.Runtimes) != 2 || caps.Runtimes[0] != (sandbox.Runtime{Name: "runc", Isolation: sandbox.IsolationContainer}) ||
		caps.Runtimes[1] != (sandbox.Runtime{Name: "runsc", Isolation: sandbox.IsolationSandboxed}) {
		t.Fatalf("runtimes offered: %+v", caps.Runtimes)
	}
	spec := h.Spec()
	spec.Runtime = "runc"
	b := sandboxtest.NewBox(t, h, &spec)
	if got := h.containerOf(t, b.ID).Container.HostConfig.Runtime; got != "runc" {
		t.Fatalf("container runtime %q, want runc", got)
	}
	spec.Runtime = "kata-runtime"
	id := sandboxtest.NewID()
	if _, err := h.p.Create(ctx(t), id, spec); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("create with a runtime not offered: %v", err)
	}
	h.CheckGone(t, id)
	if _, err := docker.New(docker.Config{DataDir: t.TempDir(), InjectByCopy: true, Runtimes: []string{"mystery"}}); err == nil {
		t.Error("a runtime of unknown isolation was accepted")
	}
}
