package egress

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

// readRequest parses a request with target as the proxy reads it from a
// box (http.ReadRequest), so that the target stays as the box wrote it.
func readRequest(t testing.TB, method, target string, header ...string) (*http.Request, error) {
	t.Helper()
	raw := method + " " + target + " HTTP/1.1\r\nHost: api.test\r\n" + strings.Join(header, "") + "\r\n"
	return http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
}

// wireTarget is the request target req goes upstream with: what req.Write
// puts on its request line, without the query.
func wireTarget(t testing.TB, req *http.Request) string {
	t.Helper()
	var b bytes.Buffer
	if err := req.Write(&b); err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(b.String(), "\r\n")
	parts := strings.Split(line, " ")
	if len(parts) != 3 {
		t.Fatalf("request line %q", line)
	}
	target, _, _ := strings.Cut(parts[1], "?")
	return target
}

// pathTricks are request targets that reach a path outside /v1 on some
// common upstream, each spelt so that a check on the decoded or cleaned
// path would see /v1.
var pathTricks = []string{
	"/admin/../v1/x",
	"/admin/%2e%2e/v1/x",
	"/admin/%2E%2E/v1/x",
	"/admin/.%2e/v1/x",
	"/admin/%2e./v1/x",
	"/admin%2f..%2fv1/x",
	"/admin%2F..%2Fv1/x",
	"/admin%5c..%5cv1/x",
	"/admin%5C..%5Cv1/x",
	"/v1/..\\admin",        // forwarded as /v1/..%5Cadmin; a backslash is a separator on some servers
	"/v1/..;/admin",        // a path parameter: "..;" is ".." on servlet containers
	"/v1/%2e%2e;x=1/admin", // both
	"/v1/%2e%2e/admin",
	"/v1/./../admin",
	"/v1/x/../../admin",
	"/v1%2f..%2fadmin",
	"/v1/x%2f..%2f..%2fadmin",
	"/%76%31/x",   // v1 spelt with escapes: another path where escapes are not decoded
	"//v1/x",      // an empty first segment: another path where slashes are not merged
	"/./v1/x",     // a dot segment in front
	"/v1/%2E/x",   // a single dot, encoded
	"/V1/x",       // another case
	"/v1beta/x",   // not a whole segment
	"*",           // not a path
	"v1/x",        // not absolute
	"/admin?/v1/", // the query is not the path
}

func TestInjectForwardedPath(t *testing.T) {
	const ph = "PH-0123456789abcdef"
	secret := Secret{Name: "k", Placeholder: ph, Value: "the-real-value", Host: "api.test", Header: "X-Key", PathPrefix: "/v1"}
	delivered := func(t *testing.T, s Secret, target string) bool {
		t.Helper()
		req, err := readRequest(t, "GET", target, "X-Key: "+ph+"\r\n")
		if err != nil {
			t.Skipf("not a request a box can send: %v", err)
		}
		used := Inject(req, "api.test", []Secret{s})
		got := req.Header.Get("X-Key")
		if (len(used) > 0) != (got == "the-real-value") {
			t.Fatalf("reported %v, header %q", used, got)
		}
		return len(used) > 0
	}
	for _, target := range []string{"/v1", "/v1/", "/v1/x", "/v1/x/y?q=../../admin", "/v1/x%20y", "/v1/x%2e%2e", "/v1/...", "http://api.test/v1/x"} {
		t.Run("delivered "+target, func(t *testing.T) {
			if !delivered(t, secret, target) {
				t.Fatal("the secret was not delivered under its prefix")
			}
		})
	}
	for _, target := range append(pathTricks, "http://api.test/admin/../v1/x") {
		t.Run("withheld "+target, func(t *testing.T) {
			if delivered(t, secret, target) {
				t.Fatal("the secret was delivered outside its prefix")
			}
		})
	}
	// No prefix (or "/"): every path of the host, dot segments included.
	for _, prefix := range []string{"", "/"} {
		s := secret
		s.PathPrefix = prefix
		for _, target := range []string{"/admin/../v1/x", "/admin%2f..%2fv1/x", "/x"} {
			t.Run(fmt.Sprintf("prefix %q %s", prefix, target), func(t *testing.T) {
				if !delivered(t, s, target) {
					t.Fatal("a secret without a prefix was not delivered")
				}
			})
		}
	}
	// A prefix that needs escapes matches its escaped spelling only.
	s := secret
	s.PathPrefix = "/files/a b"
	for target, want := range map[string]bool{"/files/a%20b/x": true, "/files/a%20b": true, "/files/a%2520b/x": false, "/files/a+b/x": false} {
		t.Run("escaped prefix "+target, func(t *testing.T) {
			if got := delivered(t, s, target); got != want {
				t.Fatalf("delivered %v, want %v", got, want)
			}
		})
	}
}

func TestApplyBindingsForwardedPath(t *testing.T) {
	bs := []Binding{{Name: "api", Schemes: []string{"https"}, Ports: []int{443}, Hosts: []string{"api.test"},
		Methods: []string{"GET"}, Paths: []string{"/v1/*", "/token"}, Headers: []BindingHeader{{"X-Key", "real"}}}}
	applied := func(t *testing.T, target string) bool {
		t.Helper()
		req, err := readRequest(t, "GET", target)
		if err != nil {
			t.Skipf("not a request a box can send: %v", err)
		}
		name, _ := ApplyBindings(req, "https", "api.test", 443, bs)
		return name != ""
	}
	for _, target := range []string{"/v1/x", "/v1/", "/v1/x/y?q=/../admin", "/token", "/token?x=1"} {
		t.Run("applied "+target, func(t *testing.T) {
			if !applied(t, target) {
				t.Fatal("the binding did not apply")
			}
		})
	}
	for _, target := range append(pathTricks, "/tok%65n", "/token/..", "/token%2f", "/v1/x%2fy", "/v1/x%5cy") {
		t.Run("not applied "+target, func(t *testing.T) {
			if applied(t, target) {
				t.Fatal("the binding applied to a path its patterns do not name")
			}
		})
	}
}

// fuzzPrefixes are the path prefixes FuzzDeliveredPath tries.
var fuzzPrefixes = []string{"/v1", "/v1/", "/api/v4/projects", "/a b", "/a:b", "/%41"}

// FuzzDeliveredPath: whenever the proxy delivers a secret (or applies a
// binding), the path it forwards is under the secret's prefix (matches
// the binding's patterns) however a common upstream reads it: as it is,
// or decoded, with dot segments resolved or not, with a backslash as a
// separator or not, with path parameters cut or not, with empty segments
// merged or not.
func FuzzDeliveredPath(f *testing.F) {
	for _, tr := range pathTricks {
		f.Add(tr, byte(0))
	}
	for i := range fuzzPrefixes {
		f.Add("/a%20b/x", byte(i))
		f.Add("/a:b/../x", byte(i))
		f.Add("/api/v4/projects/g%2Fp", byte(i))
	}
	f.Add("/v1/x", byte(0))
	const ph = "PH-0123456789abcdef"
	bs := []Binding{{Name: "api", Schemes: []string{"https"}, Ports: []int{443}, Hosts: []string{"api.test"},
		Methods: []string{"GET"}, Paths: []string{"/v1/*", "/token"}, Headers: []BindingHeader{{"X-Bound", "real"}}}}
	f.Fuzz(func(t *testing.T, target string, which byte) {
		prefix := fuzzPrefixes[int(which)%len(fuzzPrefixes)]
		req, err := readRequest(t, "GET", target, "X-Key: "+ph+"\r\n")
		if err != nil {
			return
		}
		secret := Secret{Name: "k", Placeholder: ph, Value: "real", Host: "api.test", Header: "X-Key", PathPrefix: prefix}
		delivered := len(Inject(req, "api.test", []Secret{secret})) > 0
		bound, _ := ApplyBindings(req, "https", "api.test", 443, bs)
		if !delivered && bound == "" {
			return
		}
		wire := wireTarget(t, req)
		if delivered && !segmentsUnder(upperEscapes(wire), escapeForPath(prefix)) {
			t.Fatalf("secret under %q delivered on %q, which an upstream that decodes nothing does not read under it", prefix, wire)
		}
		for _, p := range upstreamReadings(wire) {
			if delivered && !segmentsUnder(p, prefix) {
				t.Fatalf("secret under %q delivered on %q, which an upstream reads as %q", prefix, wire, p)
			}
			// (path.Clean drops a trailing slash: "/v1/" reads as "/v1".)
			if bound != "" && !strings.HasPrefix(p+"/", "/v1/") && p != "/token" {
				t.Fatalf("binding applied on %q, which an upstream reads as %q", wire, p)
			}
		}
	})
}

// upstreamReadings are the paths common upstreams make of a request
// target: percent-decoded, then dot segments resolved (RFC 3986), with
// variants.
func upstreamReadings(target string) []string {
	var out []string
	for _, backslash := range []bool{false, true} {
		for _, params := range []bool{false, true} {
			p := target
			if params { // servlet containers cut ";..." off each segment first
				segs := strings.Split(p, "/")
				for i, s := range segs {
					segs[i], _, _ = strings.Cut(s, ";")
				}
				p = strings.Join(segs, "/")
			}
			p = percentDecode(p)
			if backslash {
				p = strings.ReplaceAll(p, "\\", "/")
			}
			// As it is, dot segments resolved, and path.Clean's (which
			// also merges slashes).
			out = append(out, p, removeDotSegments(p), path.Clean(p))
		}
	}
	return out
}

// upperEscapes is s with the hex digits of each %XX in upper case.
func upperEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteString(strings.ToUpper(s[i : i+3]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// escapeForPath is p as a request target spells it: each byte that may
// not stand in a path segment (RFC 3986 pchar) as %XX.
func escapeForPath(p string) string {
	var b strings.Builder
	for i := 0; i < len(p); i++ {
		c := p[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~!$&'()*+,;=:@/", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// percentDecode decodes each %XX, leaving anything else as it is.
func percentDecode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhexByte(s[i+1])<<4 | unhexByte(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhexByte(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c >= 'a':
		return c - 'a' + 10
	}
	return c - 'A' + 10
}

// removeDotSegments is RFC 3986's algorithm (section 5.2.4).
func removeDotSegments(in string) string {
	var out []string
	for in != "" {
		switch {
		case strings.HasPrefix(in, "../"):
			in = in[3:]
		case strings.HasPrefix(in, "./"):
			in = in[2:]
		case strings.HasPrefix(in, "/./"):
			in = in[2:]
		case in == "/.":
			in = "/"
		case strings.HasPrefix(in, "/../"):
			in = in[3:]
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "/..":
			in = "/"
			if len(out) > 0 {
				out = out[:len(out)-1]
			}
		case in == "." || in == "..":
			in = ""
		default:
			j := strings.IndexByte(in[1:], '/')
			if j < 0 {
				j = len(in)
			} else {
				j++
			}
			out = append(out, in[:j])
			in = in[j:]
		}
	}
	return strings.Join(out, "")
}

// segmentsUnder reports whether the path p is prefix or under it by whole
// segments.
func segmentsUnder(p, prefix string) bool {
	pre := strings.TrimSuffix(prefix, "/")
	return pre == "" || p == pre || strings.HasPrefix(p, pre+"/")
}

// TestProxyForwardedPath: through the proxy, a secret limited to /v1 (and
// a binding of /v1/*) reaches the upstream only on requests it reads
// under /v1, and the upstream gets the target as the box wrote it.
func TestProxyForwardedPath(t *testing.T) {
	type seen struct{ uri, key, bound string }
	seenc := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seenc <- seen{r.RequestURI, r.Header.Get("X-Key"), r.Header.Get("X-Bound")}
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	b := testBox(t, loopbackConfig(newResolver(map[string][]string{"allowed.test": {"127.0.0.1"}})),
		sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"allowed.test"}})
	const ph = "PH-0123456789abcdef"
	b.SetSecrets([]Secret{{Name: "k", Placeholder: ph, Value: "the-real-value", Host: "allowed.test", Header: "X-Key", PathPrefix: "/v1"}})
	b.m.SetBindings(b.id, []Binding{{Name: "bound", Schemes: []string{"http"}, Ports: []int{int(upAddr.Port())}, Hosts: []string{"allowed.test"},
		Methods: []string{"GET"}, Paths: []string{"/v1/*"}, Headers: []BindingHeader{{"X-Bound", "bound-value"}}}})
	send := func(t *testing.T, target string) seen {
		c := pipeProxy(b, upAddr)
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: allowed.test\r\nX-Key: %s\r\nConnection: close\r\n\r\n", target, ph)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return <-seenc
	}
	if got := send(t, "/v1/x"); got.key != "the-real-value" || got.bound != "bound-value" {
		t.Fatalf("under the prefix: the upstream saw %+v", got)
	}
	for _, target := range pathTricks {
		if !strings.HasPrefix(target, "/") {
			continue // not an origin-form target
		}
		t.Run(target, func(t *testing.T) {
			got := send(t, target)
			if got.key != ph || got.bound != "" {
				t.Fatalf("the upstream got %+v on %q", got, target)
			}
			if want := strings.ReplaceAll(target, "\\", "%5C"); got.uri != want {
				t.Fatalf("the upstream got target %q, want %q", got.uri, want)
			}
		})
	}
}
