package docker_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

func TestConformance(t *testing.T) {
	sandboxtest.Run(t, newHarness(t, nil))
}

func TestUnknownImage(t *testing.T) {
	h := newHarness(t, nil)
	noPull := newHarness(t, func(c *docker.Config) { c.NoPull = true })
	// A registry that is not there: on loopback, so the config must allow
	// it (pulls from the host's own addresses are refused otherwise).
	allowed := newHarness(t, func(c *docker.Config) { c.AllowRegistries = []string{"127.0.0.1:1"} })
	for _, tt := range []struct {
		name string
		h    *harness
		ref  string
	}{
		{"pull fails", allowed, "127.0.0.1:1/astrabox/missing:1"},
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
	wait.Until(t, time.Minute, "the entrypoint to run", func() bool {
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

	// Network limited needs a local engine, iptables (and root) and an
	// egress manager.
	m := egress.NewManager(egress.Config{})
	defer m.Close()
	_, iptErr := exec.LookPath("iptables")
	canFilter := os.Geteuid() == 0 && iptErr == nil
	for _, tc := range []struct {
		name string
		cfg  docker.Config
		want bool
	}{
		{"local engine with an egress manager", docker.Config{Egress: m}, canFilter},
		{"no egress manager", docker.Config{}, false},
		{"no iptables", docker.Config{Egress: m, Iptables: "none"}, false},
		{"remote engine", docker.Config{Egress: m, Host: "tcp://192.0.2.1:2376", EgressFiltered: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.DataDir, cfg.InjectByCopy = t.TempDir(), true
			p, err := docker.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			if got := p.Capabilities().Has(sandbox.CapNetworkLimited); got != tc.want {
				t.Errorf("network limited offered: %v, want %v", got, tc.want)
			}
		})
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
