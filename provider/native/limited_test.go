package native_test

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/egresstest"
	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// limitedHarness is a harness whose provider runs egress proxies with a
// table resolver and trusts the upstream stand-in's CA.
func newLimitedHarness(t *testing.T, res egress.Resolver, roots *egresstest.Upstream) (*harness, *egress.Manager, *trust.CA) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "iptables")
	testenv.NeedCommand(t, "curl")
	dir, err := os.MkdirTemp("", "astrabox-native-lim-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ca, err := trust.LoadOrCreateCA(filepath.Join(dir, "egress"))
	if err != nil {
		t.Fatal(err)
	}
	m := egress.NewManager(egress.Config{Resolver: res, CA: ca, RootCAs: roots.Roots, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	cgroup := "astrabox-ltest-" + strconv.Itoa(os.Getpid())
	cfg := native.Config{DataDir: dir, Binary: testenv.AstraboxBinary(t), CgroupParent: cgroup, Egress: m}
	p, err := native.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close provider: %v", err)
		}
	})
	return &harness{p: p, cfg: cfg, dataDir: dir, cgroup: cgroup}, m, ca
}

// curl runs curl in b and returns its exit code and output (body, then
// "code=<http status>").
func curl(t *testing.T, b *sandboxtest.Box, args string) (int, string) {
	t.Helper()
	code, out, errOut := sh(t, b, nil, "curl -sS -m 8 -w ' code=%{http_code}' "+args)
	return code, strings.Join(strings.Fields(out+" "+errOut), " ")
}

func TestNetworkLimited(t *testing.T) {
	up := egresstest.NewUpstream(t)
	res := egresstest.NewResolver()
	private := netip.MustParseAddr("10.9.8.7")
	res.Set("allowed.test", up.Addr)
	res.Set("api.allowed.test", up.Addr)
	res.Set("other.test", up.Addr)
	res.Set("private.test", private)
	res.Set("metadata.test", netip.MustParseAddr("169.254.169.254"))
	// The box's own lookup gets a public address, the proxy's (made when
	// the box connects) loopback: DNS rebinding.
	res.Set("rebind.test", up.Addr, netip.MustParseAddr("127.0.0.1"))
	h, m, ca := newLimitedHarness(t, res, up)
	if !h.p.Capabilities().Has(sandbox.CapNetworkLimited) {
		t.Fatal("the backend does not offer network limited")
	}
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: []sandbox.NetworkRule{
		{Action: "allow", Target: "allowed.test"}, {Action: "allow", Target: "*.allowed.test"},
		{Action: "allow", Target: "rebind.test"}, {Action: "allow", Target: "private.test"},
		{Action: "allow", Target: "metadata.test"},
	}}
	spec := h.Spec()
	spec.Network = np
	b := sandboxtest.NewBox(t, h, &spec)
	// A host service on every address, which the box must not reach.
	l, err := net.Listen("tcp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	hostPort := l.Addr().(*net.TCPAddr).Port
	gw := gateway(t, b)

	cases := []struct {
		name, args string
		want       string // in the output; "" with fail: curl fails
		fail       bool
	}{
		{"an allowed domain over HTTP", "http://allowed.test/", "ok allowed.test code=200", false},
		{"an allowed domain over HTTPS", "--cacert /tmp/up-ca.pem https://allowed.test/", "ok allowed.test code=200", false},
		{"an allowed wildcard domain", "--cacert /tmp/up-ca.pem https://api.allowed.test/", "ok api.allowed.test code=200", false},
		{"a domain not allowed does not resolve", "http://other.test/", "", true},
		{"a domain not allowed, dialled by address", "--resolve other.test:80:" + up.Addr.String() + " http://other.test/", "code=403", false},
		{"a domain not allowed, over TLS by address", "--cacert /tmp/up-ca.pem --resolve other.test:443:" + up.Addr.String() + " https://other.test/", "", true},
		{"an address without a rule", "http://" + up.Addr.String() + "/", "code=403", false},
		{"DNS rebinding to loopback", "http://rebind.test/", "code=403", false},
		{"an allowed name on a private address", "--resolve private.test:80:" + up.Addr.String() + " http://private.test/", "code=403", false},
		{"an allowed name on the metadata address", "--resolve metadata.test:80:" + up.Addr.String() + " http://metadata.test/", "code=403", false},
		{"cloud metadata", "http://169.254.169.254/", "code=403", false},
		{"the host through the gateway", fmt.Sprintf("http://%s:%d/", gw, hostPort), "code=403", false},
		{"the host by another address", fmt.Sprintf("http://%s:%d/", up.HostAddr, hostPort), "code=403", false},
	}
	writeFile(t, b, "/tmp/up-ca.pem", string(up.CAPEM))
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out := curl(t, b, tc.args)
			if tc.fail {
				if code == 0 {
					t.Fatalf("curl %s succeeded: %s", tc.args, out)
				}
				return
			}
			if !strings.Contains(out, tc.want) {
				t.Fatalf("curl %s: exit %d %q, want %q", tc.args, code, out, tc.want)
			}
		})
	}
	if n := len(up.Requests()); n != 3 { // the three allowed
		t.Errorf("the upstream saw %d requests, want the 3 allowed: %+v", n, up.Requests())
	}
	// UDP other than DNS, and ICMP, go nowhere.
	if code, out, _ := sh(t, b, nil, fmt.Sprintf(`python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.settimeout(2); s.sendto(b"x", ("%s", 9)); print(s.recv(10))'`, up.Addr)); code == 0 {
		t.Errorf("UDP went out: %s", out)
	}

	// The box reads its policy on its gateway's port 18080 and cannot
	// change it there.
	if _, out := curl(t, b, fmt.Sprintf("http://%s:%d/policy", gw, egress.InBoxAPIPort)); !strings.Contains(out, `"target":"allowed.test"`) || !strings.Contains(out, "code=200") {
		t.Fatalf("in-box GET /policy: %s", out)
	}
	if _, out := curl(t, b, fmt.Sprintf(`-X PATCH -d '[{"action":"allow","target":"other.test"}]' http://%s:%d/policy`, gw, egress.InBoxAPIPort)); !strings.Contains(out, "code=403") {
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
	if _, out := curl(t, b, "http://other.test/"); !strings.Contains(out, "ok other.test code=200") {
		t.Fatalf("after PATCH, other.test: %s", out)
	}
	if code, out := curl(t, b, "--cacert /tmp/up-ca.pem https://api.allowed.test/"); code == 0 {
		t.Fatalf("after PATCH, a denied api.allowed.test: %s", out)
	}
	if _, out := curl(t, b, fmt.Sprintf("http://%s:%d/policy", gw, egress.InBoxAPIPort)); !strings.Contains(out, `"target":"other.test"`) {
		t.Fatalf("in-box GET /policy after PATCH: %s", out)
	}

	// Protected delivery: the box has a placeholder; the real value is
	// added only in requests to the secret's host.
	const placeholder = "astrabox-ph-5f0c9d1e2b3a4c5d6e7f"
	const real = "sk-REAL-secret-value-0123456789"
	m.Box(b.ID).SetSecrets([]egress.Secret{{Name: "api", Placeholder: placeholder, Value: real, Host: "allowed.test", Format: "Bearer {value}"}})
	writeFile(t, b, "/tmp/trust.pem", string(up.CAPEM)+string(ca.CertPEM()))
	for _, tc := range []struct{ host, want string }{
		{"allowed.test", "Bearer " + real},
		{"other.test", "Bearer " + placeholder},
	} {
		for _, scheme := range []string{"https", "http"} {
			_, out := curl(t, b, fmt.Sprintf(`--cacert /tmp/trust.pem -H "Authorization: Bearer %s" %s://%s/v1/x`, placeholder, scheme, tc.host))
			if !strings.Contains(out, "ok "+tc.host+" code=200") {
				t.Fatalf("%s://%s with a placeholder: %s", scheme, tc.host, out)
			}
			got, ok := up.Last(tc.host)
			if !ok || got.Authorization != tc.want || got.TLS != (scheme == "https") {
				t.Fatalf("%s://%s: the upstream saw %+v, want Authorization %q", scheme, tc.host, got, tc.want)
			}
			if strings.Contains(out, real) {
				t.Fatalf("the real value reached the box in a response: %s", out)
			}
		}
	}
	// A refused request with the placeholder: the error page has no value.
	if _, out := curl(t, b, fmt.Sprintf(`-H "Authorization: Bearer %s" --resolve nope.test:80:%s http://nope.test/`, placeholder, up.Addr)); strings.Contains(out, real) || !strings.Contains(out, "code=403") {
		t.Fatalf("refusal page: %s", out)
	}
	// Nowhere in the box: not in any process's environment, command line
	// or memory, nor in its files.
	scan := egresstest.ScanScript(real)
	_, out, errOut := sh(t, b, nil, scan)
	if !egresstest.ScanClean(out) {
		t.Fatalf("scan for the real value in the box: %s %s", out, errOut)
	}
	if refused := m.Box(b.ID).Refused.Load(); refused == 0 {
		t.Error("no refusal was counted")
	}

	// The server stops: the box reaches nothing (the rules fail closed).
	// A restarted server opens its proxy again, with the changed policy.
	m.Close()
	if code, out := curl(t, b, "http://other.test/"); code == 0 || strings.Contains(out, "ok other.test") {
		t.Fatalf("with the server stopped, other.test: exit %d %s", code, out)
	}
	if _, out := curl(t, b, "--resolve other.test:80:"+up.Addr.String()+" http://other.test/"); strings.Contains(out, "ok other.test") {
		t.Fatalf("with the server stopped, other.test by address: %s", out)
	}
	p2, err := native.New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, out := curl(t, b, "http://other.test/"); !strings.Contains(out, "ok other.test code=200") {
		t.Fatalf("after a restart, other.test: %s", out)
	}
	if _, out := curl(t, b, "http://rebind.test/"); strings.Contains(out, "code=200") {
		t.Fatalf("after a restart, rebind.test (now loopback) was reached: %s", out)
	}

	// Deleted: the proxy's listeners and the box's link are gone. (Only
	// this box's: other servers on the host may have limited boxes.)
	_, resolv, _ := sh(t, b, nil, "cat /etc/resolv.conf")
	hostEnd, ok := nameserver(resolv)
	if !ok {
		t.Fatalf("no name server in the box's resolv.conf: %q", resolv)
	}
	if n := listeners(t, hostEnd, 15001); n != 1 {
		t.Fatalf("%d egress proxy listeners on %s before delete, want 1", n, hostEnd)
	}
	if err := p2.Delete(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	if m.Box(b.ID) != nil {
		t.Error("the box's egress proxy is left after delete")
	}
	if n := listeners(t, hostEnd, 15001) + listeners(t, hostEnd, 15053); n != 0 {
		t.Errorf("%d egress proxy listeners on %s are left after delete", n, hostEnd)
	}
	if name, ok := linkWith(t, hostEnd); ok {
		t.Errorf("the box's link %s (%s) is left", name, hostEnd)
	}
}

// nameserver returns the first name server of a resolv.conf: in a box of
// mode limited, its host end's address, where its egress proxy listens.
func nameserver(resolv string) (netip.Addr, bool) {
	for _, line := range strings.Split(resolv, "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			a, err := netip.ParseAddr(f[1])
			return a, err == nil
		}
	}
	return netip.Addr{}, false
}

// linkWith returns the host interface that holds address a, if any.
func linkWith(t *testing.T, a netip.Addr) (string, bool) {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range ifs {
		addrs, _ := i.Addrs()
		for _, ad := range addrs {
			if p, err := netip.ParsePrefix(ad.String()); err == nil && p.Addr() == a {
				return i.Name, true
			}
		}
	}
	return "", false
}

// writeFile writes content to path in b.
func writeFile(t *testing.T, b *sandboxtest.Box, path, content string) {
	t.Helper()
	if code, _, errOut := sh(t, b, nil, fmt.Sprintf("cat > %s <<'EOF'\n%sEOF", path, content)); code != 0 {
		t.Fatalf("write %s: %s", path, errOut)
	}
}

// listeners counts the host's TCP sockets listening on addr:port.
func listeners(t *testing.T, addr netip.Addr, port int) int {
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	// /proc/net/tcp writes an IPv4 address as the hex of its bytes in
	// host (little-endian) order.
	a := addr.As4()
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
