package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/sandbox"
)

func TestDecide_NamesAddressesRebinding(t *testing.T) {
	res := newResolver(map[string][]string{
		"allowed.test":  {"203.0.113.2"},
		"other.test":    {"203.0.113.9"},
		"private.test":  {"192.168.1.1"},
		"mapped.test":   {"::ffff:127.0.0.1"},
		"fronting.test": {"203.0.113.2"},
	})
	res.set("rebind.test", "203.0.113.2", "127.0.0.1")
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"allowed.test", "rebind.test", "private.test", "mapped.test", "198.51.100.0/24"}}
	b := testBox(t, Config{Resolver: res}, np)
	ctx := context.Background()
	orig := netip.MustParseAddrPort("203.0.113.2:443")
	tests := []struct {
		what string
		s    sniffed
		orig netip.AddrPort
		want string // destination, or "" for refused
	}{
		{"allowed name", sniffed{name: "allowed.test"}, orig, "203.0.113.2:443"},
		{"name not allowed", sniffed{name: "other.test"}, netip.MustParseAddrPort("203.0.113.9:443"), ""},
		{"a disallowed name sent to an allowed name's address", sniffed{name: "fronting.test"}, orig, ""},
		{"allowed name on a private address", sniffed{name: "private.test"}, orig, ""},
		{"allowed name on a mapped loopback address", sniffed{name: "mapped.test"}, orig, ""},
		{"the box's address is ignored for the resolved one", sniffed{name: "allowed.test"}, netip.MustParseAddrPort("10.0.0.1:443"), "203.0.113.2:443"},
		{"nameless to an allowed CIDR", sniffed{}, netip.MustParseAddrPort("198.51.100.4:22"), "198.51.100.4:22"},
		{"nameless elsewhere", sniffed{}, netip.MustParseAddrPort("203.0.113.77:22"), ""},
		{"nameless to metadata", sniffed{}, netip.MustParseAddrPort("169.254.169.254:80"), ""},
		{"an IP-literal Host", sniffed{ip: netip.MustParseAddr("198.51.100.5")}, netip.MustParseAddrPort("203.0.113.2:80"), "198.51.100.5:80"},
	}
	for _, tt := range tests {
		ch := b.decide(ctx, tt.s, tt.orig)
		got := ""
		if ch.dst.IsValid() {
			got = ch.dst.String()
		}
		if got != tt.want {
			t.Errorf("%s: dst %q (reason %q), want %q", tt.what, got, ch.reason, tt.want)
		}
	}
	// DNS rebinding: the box's lookup got a public address; the proxy's
	// own lookup, made when the box connects, gets loopback and refuses.
	if _, err := b.resolve(ctx, "rebind.test"); err != nil {
		t.Fatalf("first lookup: %v", err)
	}
	if ch := b.decide(ctx, sniffed{name: "rebind.test"}, orig); ch.dst.IsValid() {
		t.Fatalf("rebound name allowed to %s", ch.dst)
	}
	// A connection without a name to an address the box's DNS answer gave
	// for an allowed name is allowed by that name.
	b.remember("allowed.test", []netip.Addr{netip.MustParseAddr("203.0.113.2")})
	if ch := b.decide(ctx, sniffed{}, netip.MustParseAddrPort("203.0.113.2:22")); ch.name != "allowed.test" {
		t.Fatalf("nameless to a remembered address: %+v", ch)
	}
	// HTTP and TLS must name their host: an IP-literal Host is decided by
	// the address alone.
	if ch := b.decide(ctx, sniffed{proto: protoHTTP, ip: netip.MustParseAddr("203.0.113.2")}, netip.MustParseAddrPort("203.0.113.2:80")); ch.dst.IsValid() {
		t.Fatalf("an IP-literal Host to a remembered address was allowed: %+v", ch)
	}
}

// pipeProxy runs b.proxy on one end of a pipe and returns the other.
func pipeProxy(b *Box, orig netip.AddrPort) net.Conn {
	box, proxyEnd := net.Pipe()
	go func() { defer proxyEnd.Close(); b.proxy(proxyEnd, orig) }()
	return box
}

func loopbackConfig(res *fakeResolver) Config {
	return Config{Resolver: res, AllowRanges: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}
}

func TestProxyHTTP(t *testing.T) {
	sawAuth := make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawAuth <- r.Header.Get("Authorization")
		fmt.Fprintf(w, "hello %s %s", r.Host, r.Header.Get("Authorization"))
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	res := newResolver(map[string][]string{"allowed.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}})
	b := testBox(t, loopbackConfig(res), sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"allowed.test"}})
	get := func(host string) (int, string) {
		c := pipeProxy(b, upAddr)
		defer c.Close()
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: PH-1234567890abcdef\r\nConnection: close\r\n\r\n", host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("allowed.test"); code != 200 || body != "hello allowed.test PH-1234567890abcdef" {
		t.Fatalf("allowed: %d %q", code, body)
	}
	<-sawAuth
	if code, body := get("other.test"); code != 403 || !strings.Contains(body, "not reachable") {
		t.Fatalf("other: %d %q", code, body)
	}
	// With a secret for allowed.test, its placeholder becomes the value
	// there and stays a placeholder elsewhere; the upstream's echo of the
	// value reaches the box as the placeholder.
	b.SetSecrets([]Secret{{Name: "k", Placeholder: "PH-1234567890abcdef", Value: "real-secret", Host: "allowed.test", Format: "Bearer {value}"}})
	if code, body := get("allowed.test"); code != 200 || body != "hello allowed.test Bearer PH-1234567890abcdef" {
		t.Fatalf("with secret: %d %q", code, body)
	}
	if got := <-sawAuth; got != "Bearer real-secret" {
		t.Fatalf("the upstream saw Authorization %q, want the secret's value", got)
	}
	if b.Allowed.Load() != 2 || b.Refused.Load() != 1 {
		t.Fatalf("counters: allowed %d refused %d", b.Allowed.Load(), b.Refused.Load())
	}
}

func TestProxyTLSDelivery(t *testing.T) {
	var seen = make(chan string, 4)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Host + " " + r.Header.Get("X-Api-Key")
		w.Header().Set("X-Echo", r.Header.Get("X-Api-Key"))
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	roots := x509.NewCertPool()
	roots.AddCert(up.Certificate())
	ca, _, err := trust.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	cfg := loopbackConfig(newResolver(map[string][]string{"example.com": {"127.0.0.1"}, "other.example.com": {"127.0.0.1"}}))
	cfg.CA, cfg.RootCAs = ca, roots
	b := testBox(t, cfg, sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"example.com", "other.example.com"}})
	const ph = "astrabox-placeholder-0123456789"
	b.SetSecrets([]Secret{{Name: "api", Placeholder: ph, Value: "the-real-value", Host: "example.com", Header: "X-Api-Key", PathPrefix: "/v1/"}})
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM(ca.CertPEM())
	boxRoots.AddCert(up.Certificate()) // so the box may also reach the not intercepted host
	call := func(name, path string) (*http.Response, error) {
		tr := &http.Transport{
			DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return pipeProxy(b, upAddr), nil },
			TLSClientConfig: &tls.Config{RootCAs: boxRoots, ServerName: name},
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+name+path, nil)
		req.Header.Set("X-Api-Key", ph)
		return (&http.Client{Transport: tr}).Do(req)
	}
	resp, err := call("example.com", "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != "example.com the-real-value" {
		t.Fatalf("upstream saw %q", got)
	}
	if echo := resp.Header.Get("X-Echo"); echo != ph {
		// The upstream echoed the value: the box gets its placeholder back.
		t.Fatalf("the upstream's echo reached the box as %q, want the placeholder", echo)
	}
	if resp.TLS == nil || resp.TLS.PeerCertificates[0].Issuer.CommonName != "AstraBox egress CA" {
		t.Fatal("the box's TLS was not terminated by the egress CA")
	}
	// Outside the path prefix: unchanged.
	resp, err = call("example.com", "/v2/x")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != "example.com "+ph {
		t.Fatalf("upstream saw %q outside the prefix", got)
	}
	// Another host: not intercepted (the upstream's own certificate), and
	// the placeholder arrives unchanged.
	resp, err = call("other.example.com", "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := <-seen; got != "other.example.com "+ph {
		t.Fatalf("upstream saw %q at another host", got)
	}
	if resp.TLS.PeerCertificates[0].Issuer.CommonName == "AstraBox egress CA" {
		t.Fatal("a host without secrets was intercepted")
	}
}

func TestInject(t *testing.T) {
	const ph = "PH-0123456789abcdef"
	secrets := []Secret{
		{Name: "a", Placeholder: ph, Value: "v1", Host: "*.example.com", Format: "Bearer {value}"},
		{Name: "b", Placeholder: "PH-other-000000000", Value: "v2", Host: "api.test", Header: "X-Key", PathPrefix: "/v1"},
	}
	tests := []struct {
		host, path, header, value string
		want                      string
	}{
		{"api.example.com", "/", "Authorization", "Bearer " + ph, "Bearer v1"},
		{"api.example.com", "/", "Authorization", ph, "Bearer v1"},
		{"example.com", "/", "Authorization", "Bearer " + ph, "Bearer " + ph},
		{"api.example.com", "/", "X-Other", ph, ph},
		{"api.test", "/v1/x", "X-Key", "PH-other-000000000", "v2"},
		{"api.test", "/v2/x", "X-Key", "PH-other-000000000", "PH-other-000000000"},
		{"evil.test", "/v1/x", "X-Key", "PH-other-000000000", "PH-other-000000000"},
	}
	for _, tt := range tests {
		req := httptest.NewRequest("GET", "http://"+tt.host+tt.path, nil)
		req.Header.Set(tt.header, tt.value)
		Inject(req, tt.host, secrets)
		if got := req.Header.Get(tt.header); got != tt.want {
			t.Errorf("%s%s %s: %q, want %q", tt.host, tt.path, tt.header, got, tt.want)
		}
	}
}

// TestProxyUpgradeWhereDelivered: an upgraded connection cannot be
// scrubbed, so where the box's credentials go the proxy refuses protocol
// upgrades and says why, whether this request would carry a credential or
// an earlier one did (an upstream may replay what it got on a later
// upgraded stream); elsewhere upgrades pass.
func TestProxyUpgradeWhereDelivered(t *testing.T) {
	var mu sync.Mutex
	var got []string // every X-Key the upstream received: what it may echo
	upgrades := 0
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Key"))
		echo := strings.Join(got, " ")
		mu.Unlock()
		if r.Header.Get("Upgrade") == "" && r.URL.Path != "/switch" { // /switch switches unasked
			fmt.Fprint(w, "ok")
			return
		}
		mu.Lock()
		upgrades++
		mu.Unlock()
		c, rw, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer c.Close()
		fmt.Fprintf(rw, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\nechoed: %s\n", echo)
		rw.Flush()
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	b := testBox(t, loopbackConfig(newResolver(map[string][]string{"allowed.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}})),
		sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"allowed.test", "other.test"}})
	const ph, value = "PH-0123456789abcdef", "the-real-value-42"
	b.SetSecrets([]Secret{{Name: "k", Placeholder: ph, Value: value, Host: "allowed.test", Header: "X-Key"}})
	// send writes the requests on one connection, each after the answer
	// to the one before, and returns what the box reads of the last
	// answer: its status line and body, or, after a 101, its first line.
	send := func(t *testing.T, reqs ...string) string {
		c := pipeProxy(b, upAddr)
		defer c.Close()
		br := bufio.NewReader(c)
		for i, r := range reqs {
			if _, err := io.WriteString(c, r); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if i < len(reqs)-1 {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				continue
			}
			if resp.StatusCode == http.StatusSwitchingProtocols {
				line, _ := br.ReadString('\n')
				return resp.Status + "\n" + line
			}
			body, _ := io.ReadAll(resp.Body)
			return resp.Proto + " " + resp.Status + "\n" + string(body)
		}
		return ""
	}
	upgrade := func(host, key string) string {
		return fmt.Sprintf("GET /ws HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nX-Key: %s\r\n\r\n", host, key)
	}
	plain := fmt.Sprintf("GET /v1/x HTTP/1.1\r\nHost: allowed.test\r\nX-Key: %s\r\n\r\n", ph)
	for _, tt := range []struct {
		name string
		reqs []string
	}{
		{"an upgrade that would carry the credential", []string{upgrade("allowed.test", ph)}},
		{"an upgrade after a request that carried it", []string{plain, upgrade("allowed.test", "")}},
		{"an upgrade naming another host on the connection", []string{"GET /v1/x HTTP/1.1\r\nHost: allowed.test\r\n\r\n", upgrade("other.test", "")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			mu.Lock()
			before := upgrades
			mu.Unlock()
			out := send(t, tt.reqs...)
			if strings.Contains(out, value) {
				t.Fatalf("the credential reached the box: %q", out)
			}
			if !strings.Contains(out, "HTTP/1.1 403") || !strings.Contains(out, "upgrade") || !strings.Contains(out, "credential") {
				t.Fatalf("the box was not told why: %q", out)
			}
			mu.Lock()
			defer mu.Unlock()
			if upgrades != before {
				t.Fatal("the upgrade reached the upstream")
			}
		})
	}
	// An upstream that switches protocols unasked gets its connection
	// closed; the box a 502.
	if out := send(t, fmt.Sprintf("GET /switch HTTP/1.1\r\nHost: allowed.test\r\nX-Key: %s\r\n\r\n", ph)); strings.Contains(out, value) || !strings.Contains(out, "502") {
		t.Fatalf("a switch unasked: the box read %q", out)
	}
	// Where no credential goes (the box has secrets, so the proxy reads
	// its HTTP), an upgrade passes.
	bc := pipeProxy(b, upAddr)
	defer bc.Close()
	fmt.Fprint(bc, upgrade("other.test", ""))
	resp, err := http.ReadResponse(bufio.NewReader(bc), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("an upgrade elsewhere: %v %v", resp, err)
	}
}
