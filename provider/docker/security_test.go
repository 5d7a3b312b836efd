package docker_test

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// The tests below are the items of the project's list of bad inputs a
// sandbox must survive that apply to the Docker backend only; those of
// every isolating backend are in the conformance suite.

// connectProbe exits 0 when a TCP connection to host:port succeeds within
// two seconds.
func connectProbe(host string, port int) string {
	return fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("%s", %d), timeout=2)'`, host, port)
}

// TestDiskLimitBoundsFiles: the size of the scratch file systems (the
// backend's default disk size here: a Spec's disk limit is refused)
// bounds the number of files too (the tmpfs file systems have inodes in
// proportion to their size), beyond the bytes the suite's Limits/DiskFill
// fills where a backend takes the limit.
func TestDiskLimitBoundsFiles(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) { c.Defaults.DiskBytes = 64 << 20 })
	spec := h.Spec()
	spec.Resources = sandbox.Resources{MemoryBytes: 256 << 20, PIDs: 64, MilliCPU: 500}
	b := sandboxtest.NewBox(t, h, &spec)
	for _, dir := range []string{"/workspace", "/tmp"} {
		code, _, errOut := sh(t, b, nil, "cd "+dir+" && mkdir many && for i in $(seq 100000); do : > many/$i || exit 1; done")
		if code == 0 {
			t.Fatalf("%s: 100000 files fit in a 64 MiB file system", dir)
		}
		if !strings.Contains(errOut, "No space left") {
			t.Fatalf("%s: many files failed with %q; want ENOSPC", dir, errOut)
		}
		sh(t, b, nil, "rm -rf "+dir+"/many")
	}
}

// TestDiskLimitRefused: a Spec's disk limit is refused, before anything
// is made, unless the writable layer is bounded too.
func TestDiskLimitRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		readonly bool
		want     sandbox.Code // "": created
	}{
		{"writable root file system", false, sandbox.CodeCapability},
		{"read-only root file system", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, func(c *docker.Config) { c.ReadonlyRootfs = tc.readonly })
			spec := h.Spec()
			spec.Resources.DiskBytes = 64 << 20
			id := sandboxtest.NewID()
			_, err := h.p.Create(ctx(t), id, spec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("create with a disk limit: %v", err)
				}
				if err := h.p.Delete(ctx(t), id); err != nil {
					t.Fatal(err)
				}
			} else if code := sandbox.CodeOf(err); code != tc.want || !strings.Contains(sandbox.MessageOf(err), "disk") {
				t.Fatalf("create with a disk limit: %v (code %s), want %s naming the limit", err, code, tc.want)
			}
			h.CheckGone(t, id)
		})
	}
}

func TestSecurityReadonlyRootfs(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) { c.ReadonlyRootfs = true })
	if !slices.Contains(h.p.Capabilities().Limits, sandbox.ResourceDisk) {
		t.Fatal("a read-only root does not claim the disk limit")
	}
	b := sandboxtest.NewBox(t, h, nil)
	for _, path := range []string{"/usr/probe", "/probe", "/etc/probe", "/root/probe"} {
		if code, _, errOut := sh(t, b, nil, "touch "+path); code == 0 || !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("touch %s: exit %d %q, want EROFS", path, code, errOut)
		}
	}
	for _, dir := range []string{"/workspace", "/tmp", "/var/tmp", "/run", "/dev/shm"} {
		if code, _, errOut := sh(t, b, nil, "echo x > "+dir+"/probe"); code != 0 {
			t.Errorf("%s is not writable: %s", dir, errOut)
		}
	}
}

func TestSecurityUnrestrictedNetwork(t *testing.T) {
	h := newHarness(t, nil)
	testenv.Need(t, h.p.Capabilities().Has(sandbox.CapNetworkUnrestricted), "iptables (network unrestricted)")
	spec := h.Spec()
	spec.Network.Mode = sandbox.NetworkUnrestricted
	a := sandboxtest.NewBox(t, h, &spec)
	b := sandboxtest.NewBox(t, h, &spec)

	if _, out, _ := sh(t, a, nil, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"); out != "eth0 lo " {
		t.Fatalf("interfaces %q, want eth0 and lo", out)
	}
	// b serves on port 8000; the host reaches it (replies to connections
	// the host opens pass), box a does not.
	if _, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "exec python3 -m http.server 8000", Background: true}); err != nil {
		t.Fatal(err)
	}
	_, bIP, _ := sh(t, b, nil, "hostname -i | cut -d' ' -f1")
	bIP = strings.TrimSpace(bIP)
	wait.Until(t, time.Minute, "the host to reach box b's server", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(bIP, "8000"), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _, _ := sh(t, a, nil, connectProbe(bIP, 8000)); code == 0 {
		t.Error("box a reaches box b")
	}

	// A service on every host address is out of reach.
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	addrs, _ := net.InterfaceAddrs()
	for _, a4 := range addrs {
		ipn, ok := a4.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() {
			continue
		}
		if code, _, _ := sh(t, a, nil, connectProbe(ipn.IP.String(), port)); code == 0 {
			t.Errorf("box reaches the host at %s", ipn.IP)
		}
	}

	// Metadata: the connection fails and the host's rule refused it.
	before := rejectCount(t, h, "169.254.0.0/16")
	if code, _, _ := sh(t, a, nil, connectProbe("169.254.169.254", 80)); code == 0 {
		t.Fatal("cloud metadata is reachable")
	}
	if after := rejectCount(t, h, "169.254.0.0/16"); after <= before {
		t.Fatalf("no packet to the metadata address met the host's rule (%d, then %d)", before, after)
	}
}

// rejectCount is the packet count of the host rule that refuses traffic
// from the backend's bridge to dst.
func rejectCount(t *testing.T, h *harness, dst string) int {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-S", "DOCKER-USER").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-i ` + h.p.NetworkBridge() + ` -j (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no jump for bridge %s in DOCKER-USER:\n%s", h.p.NetworkBridge(), out)
	}
	out, err = exec.Command("iptables", "-w", "-L", string(m[1]), "-v", "-n", "-x").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[2] == "REJECT" && f[8] == dst {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	t.Fatalf("no REJECT rule for %s in %s:\n%s", dst, m[1], out)
	return 0
}

// TestPullsStayOffTheHostsNetwork: an image on a registry at the host's
// loopback is refused before the engine is asked (the engine pulls as
// root from the host's network), and when the config allows that
// registry, what it answers never reaches the client.
func TestPullsStayOffTheHostsNetwork(t *testing.T) {
	const secret = "secret-internal-page-7f3a"
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		http.Error(w, secret, http.StatusInternalServerError)
	}))
	defer srv.Close()
	registry := strings.TrimPrefix(srv.URL, "http://")
	ref := registry + "/probe/x:latest"

	for _, tc := range []struct {
		name    string
		allow   []string
		code    sandbox.Code
		reached bool
	}{
		{"refused", nil, sandbox.CodeInvalidRequest, false},
		{"allowed", []string{registry}, sandbox.CodeImageNotFound, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hits.Store(0)
			h := newHarness(t, func(c *docker.Config) { c.AllowRegistries = tc.allow })
			spec := h.Spec()
			spec.Image = ref
			_, err := h.Provider().Create(ctx(t), "box-pull-"+tc.name, spec)
			if sandbox.CodeOf(err) != tc.code {
				t.Fatalf("create from %s: %v, want %s", ref, err, tc.code)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("the registry's answer reached the client: %v", err)
			}
			if got := hits.Load() > 0; got != tc.reached {
				t.Fatalf("the registry was reached: %v, want %v", got, tc.reached)
			}
		})
	}
}
