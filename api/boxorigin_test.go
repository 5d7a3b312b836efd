package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// boxPage is a web server "in the box" (the process backend's boxes share
// the host's loopback): it answers every request with the headers a page
// that tries to take over the console's origin would send, and records
// the requests it got.
type boxPage struct {
	srv  *httptest.Server
	port int
	mu   sync.Mutex
	got  []*http.Request
}

// boxHostile are the headers boxPage sets that act on a whole origin.
var boxHostile = map[string]string{
	"Service-Worker-Allowed":    "/",
	"Set-Cookie":                "box=1; Path=/",
	"Clear-Site-Data":           `"*"`,
	"Origin-Agent-Cluster":      "?0",
	"Strict-Transport-Security": "max-age=31536000; includeSubDomains",
	"Alt-Svc":                   `h2="evil.example:443"`,
	"NEL":                       `{"report_to":"box","max_age":86400}`,
	"Report-To":                 `{"group":"box","max_age":86400,"endpoints":[{"url":"https://evil.example/r"}]}`,
	"Accept-CH":                 "Sec-CH-UA-Model",
	"Set-Login":                 "logged-in",
	"Link":                      `</sw.js>; rel="serviceworker"; scope="/"`,
}

// boxHarmless are headers boxPage sets that act on its own response only.
var boxHarmless = map[string]string{
	"X-Box":              "kept",
	"Permissions-Policy": "camera=()",
	"Cache-Control":      "no-store",
}

func newBoxPage(t *testing.T) *boxPage {
	t.Helper()
	b := &boxPage{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.mu.Lock()
		b.got = append(b.got, r.Clone(context.Background()))
		b.mu.Unlock()
		for k, v := range boxHostile {
			w.Header().Set(k, v)
		}
		for k, v := range boxHarmless {
			w.Header().Set(k, v)
		}
		w.Header().Add("Set-Cookie", "wide=1; Domain=test; Path=/")
		w.Header().Set("Content-Security-Policy", "default-src 'self'")
		if r.Header.Get("Upgrade") != "" {
			// A switch of protocols, held until the other end closes.
			conn, brw, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n")
			w.Header().Write(brw)
			brw.WriteString("\r\n")
			if brw.Flush() == nil {
				_, _ = io.Copy(io.Discard, brw)
			}
			return
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, "<p>box page at %s</p>", r.URL.Path)
	}))
	t.Cleanup(b.srv.Close)
	u, _ := url.Parse(b.srv.URL)
	_, err := fmt.Sscan(u.Port(), &b.port)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requests returns the requests the box got so far.
func (b *boxPage) requests() []*http.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]*http.Request(nil), b.got...)
}

// roundTrip sends a request for path on host (the test server's address
// when empty) with headers, and returns the response's status, headers
// and body. An Upgrade request is written by hand and only its response
// head is read.
func roundTrip(t *testing.T, srvURL, host, path string, hdr map[string]string) (int, http.Header, string) {
	t.Helper()
	addr := strings.TrimPrefix(srvURL, "http://")
	if hdr["Upgrade"] != "" {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if host == "" {
			host = addr
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade\r\n", path, host)
		for k, v := range hdr {
			fmt.Fprintf(conn, "%s: %s\r\n", k, v)
		}
		fmt.Fprint(conn, "\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header, ""
	}
	req, err := http.NewRequest(http.MethodGet, srvURL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// sandboxCSP reports whether h carries a Content-Security-Policy with the
// sandbox directive and without allow-same-origin.
func sandboxCSP(h http.Header) bool {
	for _, v := range h.Values("Content-Security-Policy") {
		if strings.HasPrefix(v, "sandbox ") && strings.Contains(v, "allow-scripts") && !strings.Contains(v, "allow-same-origin") {
			return true
		}
	}
	return false
}

// TestProxySharedOriginConfinesBoxContent: on the console's origin a
// box's response loses every header that acts on the whole origin
// (Service-Worker-Allowed, Set-Cookie, Clear-Site-Data, ...), keeps the
// others, and runs sandboxed in an opaque origin (CSP sandbox without
// allow-same-origin), a WebSocket upgrade's answer included; the
// browser's cookies for the origin never reach the box.
func TestProxySharedOriginConfinesBoxContent(t *testing.T) {
	e := newEnv(t, 0)
	box := newBoxPage(t)
	sb, err := e.c.Create(ctxT(t), wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/v1/sandboxes/%s/proxy/%d/page", sb.ID, box.port)
	tests := []struct {
		name   string
		hdr    map[string]string
		status int
	}{
		{"page", map[string]string{api.HeaderAPIKey: testKey, "Cookie": "console=secret"}, http.StatusOK},
		{"upgrade", map[string]string{api.HeaderAPIKey: testKey, "Cookie": "console=secret", "Upgrade": "websocket"}, http.StatusSwitchingProtocols},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := roundTrip(t, e.srv.URL, "", path, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, body)
			}
			for k := range boxHostile {
				if v := h.Values(k); len(v) > 0 {
					t.Errorf("the box's %s reached the console's origin: %q", k, v)
				}
			}
			for k, v := range boxHarmless {
				if got := h.Get(k); got != v {
					t.Errorf("%s = %q, want the box's %q", k, got, v)
				}
			}
			if !sandboxCSP(h) {
				t.Errorf("no Content-Security-Policy sandbox without allow-same-origin: %q", h.Values("Content-Security-Policy"))
			}
			if !strings.Contains(strings.Join(h.Values("Content-Security-Policy"), "\n"), "default-src 'self'") {
				t.Errorf("the box's own policy was lost: %q", h.Values("Content-Security-Policy"))
			}
		})
	}
	got := box.requests()
	if len(got) != len(tests) {
		t.Fatalf("the box got %d requests, want %d", len(got), len(tests))
	}
	for _, r := range got {
		if c := r.Header.Get("Cookie"); c != "" {
			t.Errorf("the console origin's cookies reached the box: %q", c)
		}
	}
}

// TestProxyRefusesServiceWorkerScripts: on the console's origin a
// service worker script is never served (403 SERVICE_WORKER_REFUSED,
// before the box sees the request); a browser's own fetch of one (an
// update of a worker registered before) also clears the origin's storage,
// which removes that worker. Other requests pass.
func TestProxyRefusesServiceWorkerScripts(t *testing.T) {
	e := newEnv(t, 0)
	box := newBoxPage(t)
	sb, err := e.c.Create(ctxT(t), wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/v1/sandboxes/%s/proxy/%d/sw.js", sb.ID, box.port)
	tests := []struct {
		name      string
		hdr       map[string]string
		status    int
		clearSite string
	}{
		{"registration", map[string]string{"Service-Worker": "script"}, http.StatusForbidden, ""},
		{"browser fetch", map[string]string{"Service-Worker": "script", "Sec-Fetch-Dest": "serviceworker"}, http.StatusForbidden, `"storage"`},
		{"fetch destination only", map[string]string{"Sec-Fetch-Dest": "ServiceWorker"}, http.StatusForbidden, `"storage"`},
		{"a script", map[string]string{"Sec-Fetch-Dest": "script"}, http.StatusOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(box.requests())
			tc.hdr[api.HeaderAPIKey] = testKey
			status, h, body := roundTrip(t, e.srv.URL, "", path, tc.hdr)
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, body)
			}
			if got := h.Get("Clear-Site-Data"); got != tc.clearSite {
				t.Errorf("Clear-Site-Data %q, want %q", got, tc.clearSite)
			}
			reached := len(box.requests()) > before
			if refused := status == http.StatusForbidden; refused {
				if !strings.Contains(body, string(api.CodeServiceWorkerRefused)) {
					t.Errorf("body %.300s, want %s", body, api.CodeServiceWorkerRefused)
				}
				if reached {
					t.Error("a refused service worker request reached the box")
				}
			} else if !reached {
				t.Error("the request did not reach the box")
			}
		})
	}
}

// endpointEnv is a server with endpoint domain box.test, a box page in
// a sandbox, and what the tests send.
type endpointEnv struct {
	*env
	box  *boxPage
	id   string
	host string // the box page's endpoint host
}

func newEndpointEnv(t *testing.T, domain string) endpointEnv {
	t.Helper()
	e := newEnvConfig(t, 0, nil, func(c *server.Config) { c.EndpointDomain = domain })
	box := newBoxPage(t)
	sb, err := e.c.Create(ctxT(t), wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return endpointEnv{env: e, box: box, id: sb.ID, host: fmt.Sprintf("%d-%s.box.test", box.port, sb.ID)}
}

// TestEndpointDomainRouting: with an endpoint domain, a host
// {port}-{id}.{domain} reaches that port of that box with the request's
// path as it is (an API path, the console's "/" included), and nothing
// under the domain ever reaches the API or the console. The box's
// headers pass there (the origin is its own), but for cookies scoped
// beyond its host; the shared origin's proxy goes on working.
func TestEndpointDomainRouting(t *testing.T) {
	e := newEndpointEnv(t, "box.test")
	key := map[string]string{api.HeaderAPIKey: testKey}
	tests := []struct {
		name, host, path string
		status           int
		wantBody         string // a substring
	}{
		{"an API path reaches the box", e.host, "/v1/sandboxes", 200, "box page at /v1/sandboxes"},
		{"the platform's path reaches the box", e.host, "/api/v1/agents", 200, "box page at /api/v1/agents"},
		{"the console's page reaches the box", e.host, "/", 200, "box page at /"},
		{"health reaches the box", e.host, "/healthz", 200, "box page at /healthz"},
		{"with a port", e.host + ":8080", "/x", 200, "box page at /x"},
		{"in upper case", strings.ToUpper(e.host), "/x", 200, "box page at /x"},
		{"a path with dot segments is cleaned", e.host, "/a/../b", 307, `href="/b"`},
		{"an unknown sandbox", fmt.Sprintf("%d-nosuchbox.box.test", e.box.port), "/", 404, "SANDBOX_NOT_FOUND"},
		{"not a port label", "console.box.test", "/v1/sandboxes", 404, `"NOT_FOUND"`},
		{"a port out of range", "70000-" + e.id + ".box.test", "/v1/sandboxes", 404, `"NOT_FOUND"`},
		{"a deeper name", "a." + e.host, "/v1/sandboxes", 404, `"NOT_FOUND"`},
		{"the domain itself is the API's", "box.test", "/v1/sandboxes", 200, `"items"`},
		{"the API's host", "", "/v1/sandboxes", 200, `"items"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := roundTrip(t, e.srv.URL, tc.host, tc.path, key)
			if status != tc.status || !strings.Contains(body, tc.wantBody) {
				t.Fatalf("%s %s = %d %.300s; want %d with %q", tc.host, tc.path, status, body, tc.status, tc.wantBody)
			}
			if strings.Contains(body, "box page") {
				if sandboxCSP(h) {
					t.Error("the box's own origin got the shared origin's sandbox policy")
				}
				for _, k := range []string{"Service-Worker-Allowed", "Clear-Site-Data", "X-Box"} {
					if h.Get(k) == "" {
						t.Errorf("the box's %s did not pass on its own origin", k)
					}
				}
				if c := h.Values("Set-Cookie"); len(c) != 1 || c[0] != boxHostile["Set-Cookie"] {
					t.Errorf("Set-Cookie %q, want only the host-only %q", c, boxHostile["Set-Cookie"])
				}
			}
		})
	}

	t.Run("no key, no token", func(t *testing.T) {
		if status, _, body := roundTrip(t, e.srv.URL, e.host, "/", nil); status != 401 {
			t.Fatalf("status %d, want 401: %.300s", status, body)
		}
	})
	t.Run("a service worker on the box's own origin", func(t *testing.T) {
		hdr := map[string]string{api.HeaderAPIKey: testKey, "Service-Worker": "script", "Sec-Fetch-Dest": "serviceworker"}
		if status, h, body := roundTrip(t, e.srv.URL, e.host, "/sw.js", hdr); status != 200 || h.Get("Clear-Site-Data") != boxHostile["Clear-Site-Data"] {
			t.Fatalf("status %d, Clear-Site-Data %q: %.300s; want the box's answer", status, h.Get("Clear-Site-Data"), body)
		}
	})
}

// TestEndpointDomainToken: a browser opens an endpoint host with the
// endpoint's token in the query; the token is kept in a host-only cookie
// for the page's other requests, which then need no token, and that
// cookie is never forwarded to the box (the box's own cookies are). A
// token for another port or box opens nothing.
func TestEndpointDomainToken(t *testing.T) {
	e := newEndpointEnv(t, "box.test")
	ctx := ctxT(t)
	ep, err := e.c.Endpoint(ctx, e.id, e.box.port)
	if err != nil {
		t.Fatal(err)
	}
	tok := ep.Headers[api.HeaderProxyToken]
	other, err := e.c.Endpoint(ctx, e.id, e.box.port+1)
	if err != nil {
		t.Fatal(err)
	}

	status, h, body := roundTrip(t, e.srv.URL, e.host, "/index.html?astrabox_token="+url.QueryEscape(tok)+"&q=1", nil)
	if status != 200 {
		t.Fatalf("with the token in the query: %d %.300s", status, body)
	}
	var cookie *http.Cookie
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "astrabox_endpoint_token" {
			cookie = c
		}
	}
	if cookie == nil || cookie.Value != tok || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Domain != "" || cookie.MaxAge <= 0 {
		t.Fatalf("endpoint cookie %+v, want a host-only HttpOnly SameSite=Strict cookie with the token", cookie)
	}

	tests := []struct {
		name   string
		cookie string
		status int
	}{
		{"the cookie alone", "mine=1; astrabox_endpoint_token=" + tok, 200},
		{"another port's token", "astrabox_endpoint_token=" + other.Headers[api.HeaderProxyToken], 401},
		{"a forged token", "astrabox_endpoint_token=9999999999.AAAA", 401},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := roundTrip(t, e.srv.URL, e.host, "/app.js", map[string]string{"Cookie": tc.cookie})
			if status != tc.status {
				t.Fatalf("status %d, want %d: %.300s", status, tc.status, body)
			}
		})
	}
	t.Run("the cookie is not the box's", func(t *testing.T) {
		status, _, _ := roundTrip(t, e.srv.URL, "", fmt.Sprintf("/v1/sandboxes/%s/proxy/%d/", e.id, e.box.port),
			map[string]string{"Cookie": "astrabox_endpoint_token=" + tok})
		if status != 401 {
			t.Fatalf("the endpoint cookie opened the shared origin's proxy: %d", status)
		}
	})
	got := e.box.requests()
	if len(got) != 2 {
		t.Fatalf("the box got %d requests, want 2", len(got))
	}
	if q := got[0].URL.RawQuery; q != "q=1" {
		t.Errorf("the box got query %q, want q=1", q)
	}
	if c := got[1].Header.Get("Cookie"); c != "mine=1" {
		t.Errorf("the box got Cookie %q, want only its own mine=1", c)
	}
}

// TestEndpointURLUsesEndpointDomain: with an endpoint domain the
// endpoints handed out are {port}-{id}.{domain}[:port], without a scheme
// as OpenSandbox's are, and clients follow them (the Go client's execd,
// as the CLI uses it); use_server_proxy=true still gets the server proxy.
// Without one, endpoints stay on the server proxy.
func TestEndpointURLUsesEndpointDomain(t *testing.T) {
	e := newEndpointEnv(t, "Box.Test:8080")
	plain := newEnv(t, 0)
	ctx := ctxT(t)
	plainBox, err := plain.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func(srvURL, id, query string) (int, wire.Endpoint, string) {
		t.Helper()
		status, _, body := roundTrip(t, srvURL, "", fmt.Sprintf("/v1/sandboxes/%s/endpoints/44772?%s", id, query),
			map[string]string{api.HeaderAPIKey: testKey})
		var ep wire.Endpoint
		_ = json.Unmarshal([]byte(body), &ep)
		return status, ep, body
	}
	srvHost := strings.TrimPrefix(e.srv.URL, "http://")
	tests := []struct {
		name, srvURL, id, query string
		status                  int
		want                    string
	}{
		{"endpoint domain", e.srv.URL, e.id, "", 200, "44772-" + e.id + ".box.test:8080"},
		{"with expires", e.srv.URL, e.id, "expires=600", 200, "44772-" + e.id + ".box.test:8080"},
		{"server proxy asked for", e.srv.URL, e.id, "use_server_proxy=true", 200, srvHost + "/v1/sandboxes/" + e.id + "/proxy/44772"},
		{"server proxy declined", e.srv.URL, e.id, "use_server_proxy=false", 200, "44772-" + e.id + ".box.test:8080"},
		{"use_server_proxy not a boolean", e.srv.URL, e.id, "use_server_proxy=maybe", 400, ""},
		{"no endpoint domain", plain.srv.URL, plainBox.ID, "", 200, strings.TrimPrefix(plain.srv.URL, "http://") + "/v1/sandboxes/" + plainBox.ID + "/proxy/44772"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, ep, body := get(tc.srvURL, tc.id, tc.query)
			if status != tc.status || ep.Endpoint != tc.want {
				t.Fatalf("%d %q (%.300s), want %d %q", status, ep.Endpoint, body, tc.status, tc.want)
			}
		})
	}

	// The SDK's execd goes through the server proxy on the API's host: a
	// program needs no wildcard DNS for the endpoint domain.
	c := client.New(e.srv.URL, testKey)
	x, err := c.Execd(ctx, e.id)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.Ping(ctx); err != nil {
		t.Fatalf("execd through the server proxy: %v", err)
	}
}

// TestEndpointDomainThroughAnotherReplica: a request to an endpoint host
// that reaches a replica not serving the box's backend instance is
// forwarded to the replica that does with its Host unchanged, so that
// replica serves it as the box's origin too (not as an API request).
func TestEndpointDomainThroughAnotherReplica(t *testing.T) {
	ctx := ctxT(t)
	st, err := sqlite.Open(ctx, t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	n := newRecordingNotifier()
	type replica struct {
		hs  *httptest.Server
		srv *server.Server
		p   *process.Provider
	}
	start := func() replica {
		p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{"ASTRABOX_TEST_MAIN=1"}})
		if err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewUnstartedServer(nil)
		srv := newServer(t, server.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, DefaultBackend: "process",
			Notifier: n, EndpointDomain: "box.test", Holder: "http://" + hs.Listener.Addr().String()})
		hs.Config.Handler = srv.Handler
		hs.Start()
		t.Cleanup(func() {
			boxes, _ := p.List(context.Background())
			for _, b := range boxes {
				_ = p.Delete(context.Background(), b.ID)
			}
			hs.Close()
		})
		return replica{hs, srv, p}
	}
	holder, other := start(), start()
	box := newBoxPage(t)
	sb, err := client.New(holder.hs.URL, testKey).Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The holder's reconciler pass takes its instance's lease, which
	// names it as the replica serving the box.
	holder.srv.Sandboxes.ReconcileBackend(ctx, "process", holder.p)

	host := fmt.Sprintf("%d-%s.box.test", box.port, sb.ID)
	status, _, body := roundTrip(t, other.hs.URL, host, "/v1/sandboxes", map[string]string{api.HeaderAPIKey: testKey})
	if status != 200 || !strings.Contains(body, "box page at /v1/sandboxes") {
		t.Fatalf("through the other replica: %d %.300s; want the box's page", status, body)
	}
	got := box.requests()
	if len(got) != 1 {
		t.Fatalf("the box got %d requests, want 1", len(got))
	}
}
