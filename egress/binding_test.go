package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log/slog"
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

func TestApplyBindings(t *testing.T) {
	bs := []Binding{
		{Name: "api", Schemes: []string{"https"}, Ports: []int{443}, Hosts: []string{"api.example.com"},
			Methods: []string{"GET", "POST"}, Paths: []string{"/v1/*"}, Headers: []BindingHeader{{"Authorization", "Bearer real-1"}}},
		{Name: "wild", Schemes: []string{"https", "http"}, Ports: []int{443, 80}, Hosts: []string{"*.example.com"},
			Methods: []string{"GET"}, Paths: []string{"/*"}, Headers: []BindingHeader{{"X-Api-Key", "real-2"}}},
		{Name: "exact-path", Schemes: []string{"http"}, Ports: []int{8080}, Hosts: []string{"svc.test"},
			Methods: []string{"GET"}, Paths: []string{"/token"}, Headers: []BindingHeader{{"X-A", "a"}, {"X-B", "b"}}},
	}
	tests := []struct {
		name                 string
		method, scheme, host string
		port                 int
		path                 string
		want                 string            // binding applied ("": none)
		headers              map[string]string // expected afterwards
	}{
		{"exact host wins over wildcard", "GET", "https", "api.example.com", 443, "/v1/models", "api", map[string]string{"Authorization": "Bearer real-1", "X-Api-Key": "box"}},
		{"exact host, path outside: the wildcard", "GET", "https", "api.example.com", 443, "/v2/x", "wild", map[string]string{"Authorization": "box", "X-Api-Key": "real-2"}},
		{"method not listed", "DELETE", "https", "api.example.com", 443, "/v1/models", "", map[string]string{"Authorization": "box"}},
		{"lower-case method", "post", "https", "api.example.com", 443, "/v1/models", "api", map[string]string{"Authorization": "Bearer real-1"}},
		{"scheme not listed", "GET", "https", "svc.test", 8080, "/token", "", nil},
		{"port not listed", "GET", "https", "api.example.com", 8443, "/v1/models", "", nil},
		{"wildcard is not the apex", "GET", "https", "example.com", 443, "/", "", nil},
		{"other host", "GET", "https", "evil.test", 443, "/v1/models", "", map[string]string{"Authorization": "box", "X-Api-Key": "box"}},
		{"dot segments get nothing", "GET", "https", "api.example.com", 443, "/v1/../admin", "", map[string]string{"Authorization": "box"}},
		{"exact path", "GET", "http", "svc.test", 8080, "/token", "exact-path", map[string]string{"X-A": "a", "X-B": "b"}},
		{"exact path only", "GET", "http", "svc.test", 8080, "/token/x", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(tt.method, "http://"+tt.host+tt.path, nil)
			req.URL.Path = tt.path // keep dot segments as a box may send them
			req.Header.Set("Authorization", "box")
			req.Header.Set("X-Api-Key", "box")
			got, amb := ApplyBindings(req, tt.scheme, tt.host, tt.port, bs)
			if got != tt.want || amb {
				t.Fatalf("applied %q (ambiguous %v), want %q", got, amb, tt.want)
			}
			for k, v := range tt.headers {
				if req.Header.Get(k) != v || len(req.Header.Values(k)) != 1 {
					t.Errorf("%s = %q, want %q", k, req.Header.Values(k), v)
				}
			}
		})
	}
	// Two bindings alike: ambiguous, none applies.
	twin := append([]Binding{bs[0]}, bs[0])
	twin[1].Name = "twin"
	req := httptest.NewRequest("GET", "https://api.example.com/v1/x", nil)
	if got, amb := ApplyBindings(req, "https", "api.example.com", 443, twin); got != "" || !amb || req.Header.Get("Authorization") != "" {
		t.Fatalf("ambiguous: %q %v %q", got, amb, req.Header.Get("Authorization"))
	}
}

func TestBindingRedacts(t *testing.T) {
	b := Binding{Name: "n", Hosts: []string{"h.test"}, Headers: []BindingHeader{{"Authorization", "Bearer TOPSECRET"}}}
	var log bytes.Buffer
	slog.New(slog.NewTextHandler(&log, nil)).Info("x", "b", b, "h", b.Headers[0])
	for _, s := range []string{fmt.Sprint(b), fmt.Sprintf("%+v", b), fmt.Sprintf("%#v", b), fmt.Sprint(b.Headers), log.String()} {
		if strings.Contains(s, "TOPSECRET") || !strings.Contains(s, "Authorization") {
			t.Errorf("printed %q", s)
		}
	}
}

// syncBuffer is a log destination tests read while the proxy writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProxyBindingsHTTP(t *testing.T) {
	seen := make(chan string, 8)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Host + " " + r.Header.Get("X-Api-Key")
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	upAddr := netip.MustParseAddrPort(up.Listener.Addr().String())
	var logs syncBuffer
	cfg := loopbackConfig(newResolver(map[string][]string{"allowed.test": {"127.0.0.1"}, "other.test": {"127.0.0.1"}}))
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := testBox(t, cfg, sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"allowed.test", "other.test"}})
	get := func(host, path string) string {
		c := pipeProxy(b, upAddr)
		defer c.Close()
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", host, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), "real-key") {
			t.Fatalf("the value reached the box: %q", body)
		}
		return <-seen
	}
	if got := get("allowed.test", "/x"); got != "allowed.test " {
		t.Fatalf("before the binding: %q", got)
	}
	b.m.SetBindings(b.id, []Binding{{Name: "k", Schemes: []string{"http"}, Ports: []int{int(upAddr.Port())}, Hosts: []string{"allowed.test"},
		Methods: []string{"GET"}, Paths: []string{"/*"}, Headers: []BindingHeader{{"X-Api-Key", "real-key"}}}})
	if got := get("allowed.test", "/x"); got != "allowed.test real-key" {
		t.Fatalf("with the binding: %q", got)
	}
	if got := get("other.test", "/x"); got != "other.test " {
		t.Fatalf("another host: %q", got)
	}
	b.m.SetBindings(b.id, nil)
	if got := get("allowed.test", "/x"); got != "allowed.test " {
		t.Fatalf("after the binding went: %q", got)
	}
	if strings.Contains(logs.String(), "real-key") || !strings.Contains(logs.String(), "binding=k") {
		t.Fatalf("logs: %s", logs.String())
	}
}

func TestProxyBindingsTLS(t *testing.T) {
	seen := make(chan string, 8)
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Host + " " + r.Header.Get("Authorization")
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
	b.m.SetBindings(b.id, []Binding{{Name: "api", Schemes: []string{"https"}, Ports: []int{int(upAddr.Port())}, Hosts: []string{"example.com"},
		Methods: []string{"GET"}, Paths: []string{"/v1/*"}, Headers: []BindingHeader{{"Authorization", "Bearer real-token"}}}})
	boxRoots := x509.NewCertPool()
	boxRoots.AppendCertsFromPEM(ca.CertPEM())
	boxRoots.AddCert(up.Certificate())
	call := func(name, path string) (*http.Response, string) {
		tr := &http.Transport{
			DialContext:     func(ctx context.Context, _, _ string) (net.Conn, error) { return pipeProxy(b, upAddr), nil },
			TLSClientConfig: &tls.Config{RootCAs: boxRoots, ServerName: name},
		}
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequest("GET", "https://"+name+path, nil)
		req.Header.Set("Authorization", "Bearer from-the-box")
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp, <-seen
	}
	resp, got := call("example.com", "/v1/models")
	if got != "example.com Bearer real-token" || resp.TLS.PeerCertificates[0].Issuer.CommonName != "AstraBox egress CA" {
		t.Fatalf("bound destination: upstream saw %q, issuer %q", got, resp.TLS.PeerCertificates[0].Issuer.CommonName)
	}
	if _, got := call("example.com", "/v2/models"); got != "example.com Bearer from-the-box" {
		t.Fatalf("outside the paths: %q", got)
	}
	// A host no binding names is not intercepted at all.
	resp, got = call("other.example.com", "/v1/models")
	if got != "other.example.com Bearer from-the-box" || resp.TLS.PeerCertificates[0].Issuer.CommonName == "AstraBox egress CA" {
		t.Fatalf("other host: upstream saw %q, intercepted %v", got, resp.TLS.PeerCertificates[0].Issuer.CommonName)
	}
}
