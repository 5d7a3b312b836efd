package docker_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/egresstest"
	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// fetchPy is the HTTP client of these tests, run in the box with the
// image's python3 (the image has no curl): fetch.py URL [--resolve IP]
// [--cacert FILE] [-X METHOD] [-d BODY] [-H HEADER] prints the response
// body and "code=STATUS", or "error: ..." and exits 7.
const fetchPy = `import argparse, socket, ssl, sys, urllib.parse
ap = argparse.ArgumentParser()
ap.add_argument("url"); ap.add_argument("--resolve"); ap.add_argument("--cacert")
ap.add_argument("-X", default="GET"); ap.add_argument("-d", default=""); ap.add_argument("-H", action="append", default=[])
a = ap.parse_args()
u = urllib.parse.urlsplit(a.url)
port = u.port or (443 if u.scheme == "https" else 80)
try:
    ip = a.resolve or socket.gethostbyname(u.hostname)
    s = socket.create_connection((ip, port), timeout=8)
    s.settimeout(8)
    if u.scheme == "https":
        s = ssl.create_default_context(cafile=a.cacert).wrap_socket(s, server_hostname=u.hostname)
    body = a.d.encode()
    head = "".join(h + "\r\n" for h in a.H)
    s.sendall(f"{a.X} {u.path or '/'} HTTP/1.1\r\nHost: {u.netloc}\r\nConnection: close\r\nContent-Length: {len(body)}\r\n{head}\r\n".encode() + body)
    data = b""
    while True:
        c = s.recv(65536)
        if not c: break
        data += c
    status, _, rest = data.partition(b"\r\n\r\n")
    code = status.split(b" ")[1].decode() if status.startswith(b"HTTP/") else "000"
    print(rest.decode(errors="replace").strip(), "code=" + code)
except Exception as e:
    print("error:", type(e).__name__, e)
    sys.exit(7)
`

// newLimitedHarness is a harness whose Provider serves network limited
// with m: a table resolver, the upstream stand-in's CA trusted.
func newLimitedHarness(t *testing.T, res egress.Resolver, up *egresstest.Upstream) (*harness, *egress.Manager, *trust.CA) {
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	testenv.NeedCommand(t, "iptables-save")
	ca, err := trust.LoadOrCreateCA(filepath.Join(t.TempDir(), "egress"))
	if err != nil {
		t.Fatal(err)
	}
	m := egress.NewManager(egress.Config{Resolver: res, CA: ca, RootCAs: up.Roots, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	h := newHarness(t, func(c *docker.Config) { c.Egress = m })
	if !h.p.Capabilities().Has(sandbox.CapNetworkLimited) {
		t.Fatal("a local engine with iptables and an egress manager does not offer network limited")
	}
	return h, m, ca
}

// fetch runs fetchPy in b with args; it returns the exit code and the
// output on one line.
func fetch(t *testing.T, b *sandboxtest.Box, args string) (int, string) {
	t.Helper()
	code, out, errOut := sh(t, b, nil, "python3 /tmp/fetch.py "+args)
	return code, strings.Join(strings.Fields(out+" "+errOut), " ")
}

// putFile writes content to path in b.
func putFile(t *testing.T, b *sandboxtest.Box, path, content string) {
	t.Helper()
	if code, _, errOut := sh(t, b, nil, fmt.Sprintf("cat > %s <<'EOF'\n%sEOF", path, content)); code != 0 {
		t.Fatalf("write %s: %s", path, errOut)
	}
}

// ownRules returns the lines of iptables-save that name the limited
// network's bridge or chains of h's owner.
func ownRules(t *testing.T, h *harness) []string {
	t.Helper()
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	bridge := h.p.LimitedBridge()
	tag := "ASTRABOX-DKL" // + NAT/IN/FWD and the owner's hash, which the bridge ends with
	hash := strings.ToUpper(strings.TrimPrefix(bridge, "sbxl"))
	var lines []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, bridge) || (strings.Contains(l, tag) && strings.Contains(l, hash)) {
			lines = append(lines, l)
		}
	}
	return lines
}

// boxNet is the address of box id and its gateway on the limited network.
func boxNet(t *testing.T, h *harness, id string) (addr, gw netip.Addr) {
	t.Helper()
	for _, n := range h.containerOf(t, id).Container.NetworkSettings.Networks {
		return n.IPAddress, n.Gateway
	}
	t.Fatalf("box %s is on no network", id)
	return
}

// gateListeners counts the host's TCP sockets listening on gw's port.
func gateListeners(t *testing.T, gw netip.Addr, port int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	a := gw.As4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", a[3], a[2], a[1], a[0], port)
	n := 0
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 3 && f[1] == want && f[3] == "0A" {
			n++
		}
	}
	return n
}

func TestNetworkLimited(t *testing.T) {
	up := egresstest.NewUpstream(t)
	res := egresstest.NewResolver()
	res.Set("allowed.test", up.Addr)
	res.Set("api.allowed.test", up.Addr)
	res.Set("other.test", up.Addr)
	res.Set("private.test", netip.MustParseAddr("10.9.8.7"))
	res.Set("metadata.test", netip.MustParseAddr("169.254.169.254"))
	// The box's own lookup gets a public address, the proxy's (made when
	// the box connects) loopback: DNS rebinding.
	res.Set("rebind.test", up.Addr, netip.MustParseAddr("127.0.0.1"))
	h, m, ca := newLimitedHarness(t, res, up)
	if rules := ownRules(t, h); len(rules) != 0 {
		t.Fatalf("host rules of the limited network before any box: %q", rules)
	}
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: []sandbox.NetworkRule{
		{Action: "allow", Target: "allowed.test"}, {Action: "allow", Target: "*.allowed.test"},
		{Action: "allow", Target: "rebind.test"}, {Action: "allow", Target: "private.test"},
		{Action: "allow", Target: "metadata.test"},
	}}
	spec := h.Spec()
	spec.Network = np
	b := sandboxtest.NewBox(t, h, &spec)
	peer := sandboxtest.NewBox(t, h, &spec) // another limited box, on the same bridge
	_, gw := boxNet(t, h, b.ID)
	peerAddr, _ := boxNet(t, h, peer.ID)
	startedAt := h.containerOf(t, b.ID).Container.State.StartedAt
	t.Logf("host rules of the limited network:\n%s", strings.Join(ownRules(t, h), "\n"))
	for _, x := range []*sandboxtest.Box{b, peer} {
		putFile(t, x, "/tmp/fetch.py", fetchPy)
	}
	putFile(t, b, "/tmp/up-ca.pem", string(up.CAPEM))
	// A service of the peer box, which b must not reach.
	if code, _, errOut := sh(t, peer, nil, "cd /tmp && nohup python3 -m http.server 8000 --bind 0.0.0.0 >/dev/null 2>&1 &"); code != 0 {
		t.Fatalf("start the peer's server: %s", errOut)
	}
	wait.Until(t, time.Minute, "the peer's server", func() bool {
		_, out := fetch(t, peer, "http://127.0.0.1:8000/")
		return strings.Contains(out, "code=200")
	})
	// A host service on every address, which no box may reach.
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hostPort := l.Addr().(*net.TCPAddr).Port

	cases := []struct {
		name, args string
		want       string // in the output; "" with fail: the fetch fails
		fail       bool
	}{
		{"an allowed domain over HTTP", "http://allowed.test/", "ok allowed.test code=200", false},
		{"an allowed domain over HTTPS", "--cacert /tmp/up-ca.pem https://allowed.test/", "ok allowed.test code=200", false},
		{"an allowed wildcard domain", "--cacert /tmp/up-ca.pem https://api.allowed.test/", "ok api.allowed.test code=200", false},
		{"a domain not allowed does not resolve", "http://other.test/", "", true},
		{"a domain not allowed, dialled by address", "--resolve " + up.Addr.String() + " http://other.test/", "code=403", false},
		{"a domain not allowed, over TLS by address", "--cacert /tmp/up-ca.pem --resolve " + up.Addr.String() + " https://other.test/", "", true},
		{"an address without a rule", "http://" + up.Addr.String() + "/", "code=403", false},
		{"DNS rebinding to loopback", "http://rebind.test/", "code=403", false},
		{"an allowed name on a private address", "--resolve " + up.Addr.String() + " http://private.test/", "code=403", false},
		{"an allowed name on the metadata address", "--resolve " + up.Addr.String() + " http://metadata.test/", "code=403", false},
		{"cloud metadata", "http://169.254.169.254/", "code=403", false},
		{"a private range", "http://10.9.8.7/", "code=403", false},
		{"another box", fmt.Sprintf("http://%s:8000/", peerAddr), "code=403", false},
		{"the host through the gateway", fmt.Sprintf("http://%s:%d/", gw, hostPort), "code=403", false},
		{"the host by another address", fmt.Sprintf("http://%s:%d/", up.HostAddr, hostPort), "code=403", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := fetch(t, b, tc.args)
			if tc.fail {
				if code == 0 {
					t.Fatalf("fetch %s succeeded: %s", tc.args, out)
				}
				return
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("fetch %s: exit %d %q, want %q", tc.args, code, out, tc.want)
			}
		})
	}
	if n := len(up.Requests()); n != 3 { // the three allowed
		t.Errorf("the upstream saw %d requests, want the 3 allowed: %+v", n, up.Requests())
	}

	// UDP other than DNS, to the host or beyond, is rejected by the rules.
	udp, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	udpPort := udp.LocalAddr().(*net.UDPAddr).Port
	for _, dst := range []string{gw.String(), up.HostAddr.String(), up.Addr.String()} {
		send := fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(b"x", ("%s", %d)); print(s.recv(10))'`, dst, udpPort)
		if code, out, _ := sh(t, b, nil, send); code == 0 {
			t.Errorf("UDP to %s got an answer: %s", dst, out)
		}
	}
	_ = udp.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, from, err := udp.ReadFrom(make([]byte, 16)); err == nil {
		t.Errorf("a box's UDP reached the host (from %s)", from)
	}

	// The box reads its policy on its gateway's port 18080 and cannot
	// change it there.
	apiURL := fmt.Sprintf("http://%s:%d/policy", gw, egress.InBoxAPIPort)
	if _, out := fetch(t, b, apiURL); !strings.Contains(out, `"target":"allowed.test"`) || !strings.Contains(out, "code=200") {
		t.Fatalf("in-box GET /policy: %s", out)
	}
	if _, out := fetch(t, b, `-X PATCH -d '[{"action":"allow","target":"other.test"}]' `+apiURL); !strings.Contains(out, "code=403") {
		t.Fatalf("in-box PATCH /policy: %s", out)
	}

	// A change at run time takes effect at once, without a restart.
	patched, err := egress.Merge(np, []sandbox.NetworkRule{{Action: "allow", Target: "other.test"}, {Action: "deny", Target: "api.allowed.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.p.SetNetworkPolicy(ctx(t), b.ID, patched); err != nil {
		t.Fatal(err)
	}
	if _, out := fetch(t, b, "http://other.test/"); !strings.Contains(out, "ok other.test code=200") {
		t.Fatalf("after PATCH, other.test: %s", out)
	}
	if code, out := fetch(t, b, "--cacert /tmp/up-ca.pem https://api.allowed.test/"); code == 0 {
		t.Fatalf("after PATCH, a denied api.allowed.test: %s", out)
	}
	if _, out := fetch(t, b, apiURL); !strings.Contains(out, `"target":"other.test"`) {
		t.Fatalf("in-box GET /policy after PATCH: %s", out)
	}
	if _, out := fetch(t, peer, "http://other.test/"); strings.Contains(out, "code=200") {
		t.Fatalf("the PATCH of one box widened another's policy: %s", out)
	}
	if got := h.containerOf(t, b.ID).Container.State.StartedAt; got != startedAt {
		t.Fatalf("the box restarted: started at %s, then %s", startedAt, got)
	}
	if err := h.p.SetNetworkPolicy(ctx(t), b.ID, sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Errorf("a policy of mode unrestricted at run time: %v, want %s", err, sandbox.CodeCapability)
	}

	// Protected delivery: the real value is added only in requests to
	// the secret's host.
	const placeholder = "astrabox-ph-7a1c9d1e2b3a4c5d6e7f"
	const real = "sk-REAL-docker-secret-0123456789"
	m.Box(b.ID).SetSecrets([]egress.Secret{{Name: "api", Placeholder: placeholder, Value: real, Host: "allowed.test", Format: "Bearer {value}"}})
	putFile(t, b, "/tmp/trust.pem", string(up.CAPEM)+string(ca.CertPEM()))
	for _, tc := range []struct{ host, want string }{{"allowed.test", "Bearer " + real}, {"other.test", "Bearer " + placeholder}} {
		for _, scheme := range []string{"https", "http"} {
			_, out := fetch(t, b, fmt.Sprintf(`--cacert /tmp/trust.pem -H "Authorization: Bearer %s" %s://%s/v1/x`, placeholder, scheme, tc.host))
			if !strings.Contains(out, "ok "+tc.host+" code=200") || strings.Contains(out, real) {
				t.Fatalf("%s://%s with a placeholder: %s", scheme, tc.host, out)
			}
			if got, ok := up.Last(tc.host); !ok || got.Authorization != tc.want || got.TLS != (scheme == "https") {
				t.Fatalf("%s://%s: the upstream saw %+v, want Authorization %q", scheme, tc.host, got, tc.want)
			}
		}
	}
	if refused := m.Box(b.ID).Refused.Load(); refused == 0 {
		t.Error("no refusal was counted")
	}

	// The rules sit where the engine's own cannot overtake them.
	for _, rule := range [][]string{
		{"-t", "nat", "-S", "PREROUTING"}, {"-t", "filter", "-S", "INPUT"}, {"-t", "filter", "-S", "DOCKER-USER"},
	} {
		out, err := exec.Command("iptables", append([]string{"-w"}, rule...)...).Output()
		if err != nil || !strings.Contains(string(out), "-i "+h.p.LimitedBridge()+" -j ASTRABOX-DKL") {
			t.Errorf("iptables %v has no jump for the limited bridge: %s %v", rule, out, err)
		}
	}

	// The server stops: the box reaches nothing (the rules fail closed).
	// A restarted server opens the gate again, with the changed policy.
	m.Close()
	if code, out := fetch(t, b, "http://other.test/"); code == 0 || strings.Contains(out, "ok other.test") {
		t.Fatalf("with the server stopped, other.test: exit %d %s", code, out)
	}
	if _, out := fetch(t, b, "--resolve "+up.Addr.String()+" http://other.test/"); strings.Contains(out, "ok other.test") {
		t.Fatalf("with the server stopped, other.test by address: %s", out)
	}
	p2 := h.Reopen(t).(*docker.Provider)
	if _, out := fetch(t, b, "http://other.test/"); !strings.Contains(out, "ok other.test code=200") {
		t.Fatalf("after a restart, other.test: %s", out)
	}
	if _, out := fetch(t, b, "http://rebind.test/"); strings.Contains(out, "code=200") {
		t.Fatalf("after a restart, rebind.test (now loopback) was reached: %s", out)
	}
	if _, out := fetch(t, peer, "http://allowed.test/"); !strings.Contains(out, "ok allowed.test code=200") {
		t.Fatalf("after a restart, the peer's allowed.test: %s", out)
	}
	// A box whose egress record is lost (as when Attach restores its box
	// record from the state blob) gets it back with its next policy.
	record := filepath.Join(h.dataDir, "boxes", b.ID, "egress.json")
	if err := os.Remove(record); err != nil {
		t.Fatal(err)
	}
	if err := p2.SetNetworkPolicy(ctx(t), b.ID, np); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("the egress record was not written again: %v", err)
	}
	if _, out := fetch(t, b, "http://other.test/"); strings.Contains(out, "code=200") {
		t.Fatalf("after the first policy is back, other.test: %s", out)
	}

	// Deleted: while one limited box is left, the network and its rules
	// stay; with the last, nothing of the mode is left.
	for i, x := range []*sandboxtest.Box{peer, b} {
		if err := p2.Delete(ctx(t), x.ID); err != nil {
			t.Fatal(err)
		}
		if m.Box(x.ID) != nil {
			t.Errorf("the egress state of %s is left after delete", x.ID)
		}
		rules := ownRules(t, h)
		_, err := h.engine.NetworkInspect(ctx(t), h.cfg.Owner+"-lim", client.NetworkInspectOptions{})
		if i == 0 {
			if len(rules) == 0 || err != nil {
				t.Fatalf("with a limited box left, the rules (%d lines) or the network (%v) are gone", len(rules), err)
			}
			if _, out := fetch(t, b, "http://allowed.test/"); !strings.Contains(out, "ok allowed.test code=200") {
				t.Fatalf("the box left after its peer's delete, allowed.test: %s", out)
			}
			continue
		}
		if len(rules) != 0 {
			t.Errorf("host rules of the limited network are left after the last delete:\n%s", strings.Join(rules, "\n"))
		}
		if !cerrdefs.IsNotFound(err) {
			t.Errorf("the limited network is left after the last delete: %v", err)
		}
		if n := gateListeners(t, gw, 15101) + gateListeners(t, gw, 15153); n != 0 {
			t.Errorf("%d gate listeners are left after the last delete", n)
		}
		h.CheckGone(t, x.ID)
	}
}

// TestNetworkLimitedRefused: a limited box is refused, before anything is
// made, where the mode is not offered or the policy is invalid.
func TestNetworkLimitedRefused(t *testing.T) {
	h := newHarness(t, nil) // no egress manager
	limited := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: []sandbox.NetworkRule{{Action: "allow", Target: "example.com"}}}
	spec := h.Spec()
	spec.Network = limited
	id := sandboxtest.NewID()
	if _, err := h.p.Create(ctx(t), id, spec); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("limited without an egress manager: %v, want %s", err, sandbox.CodeCapability)
	}
	h.CheckGone(t, id)
	b := sandboxtest.NewBox(t, h, nil)
	if err := h.p.SetNetworkPolicy(ctx(t), b.ID, limited); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("a policy for a box of mode none: %v, want %s", err, sandbox.CodeCapability)
	}

	m := egress.NewManager(egress.Config{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	h2 := newHarness(t, func(c *docker.Config) { c.Egress = m })
	spec.Network.Rules = []sandbox.NetworkRule{{Action: "allow", Target: "bad target with spaces"}}
	id = sandboxtest.NewID()
	if _, err := h2.p.Create(ctx(t), id, spec); sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("an invalid rule: %v, want %s", err, sandbox.CodeInvalidRequest)
	}
	h2.CheckGone(t, id)
	if err := h2.p.SetNetworkPolicy(ctx(t), sandboxtest.NewID(), limited); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("a policy for a box that does not exist: %v, want ErrNotFound", err)
	}
}
