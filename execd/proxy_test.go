package execd_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// proxyEcho is what the test upstream reports about a request.
type proxyEcho struct {
	Method, Path, RawPath, Query, Host, ForwardedHost, Token, SHA256 string
	Length                                                           int
}

// proxyUpstream is an HTTP server on a loopback port, standing in for a
// program in the box: /sse sends one event, waits for /release, then sends
// another; /ws echoes WebSocket messages; anything else is described back
// as JSON.
func proxyUpstream(t *testing.T) (port int) {
	t.Helper()
	release := make(chan struct{}, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: one\ndata: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "event: two\ndata: second\n\n")
	})
	mux.HandleFunc("/release", func(w http.ResponseWriter, r *http.Request) { release <- struct{}{} })
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		conn, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		defer conn.CloseNow()
		conn.SetReadLimit(-1)
		for {
			typ, data, err := conn.Read(r.Context())
			if err != nil {
				return
			}
			if err := conn.Write(r.Context(), typ, data); err != nil {
				return
			}
		}
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		sum := sha256.Sum256(body)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(proxyEcho{
			Method: r.Method, Path: r.URL.Path, RawPath: r.URL.EscapedPath(), Query: r.URL.RawQuery,
			Host: r.Host, ForwardedHost: r.Header.Get("X-Forwarded-Host"),
			Token: r.Header.Get(wire.HeaderAccessToken), SHA256: hex.EncodeToString(sum[:]), Length: len(body),
		})
	})
	up := httptest.NewServer(mux)
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	_, p, _ := net.SplitHostPort(u.Host)
	fmt.Sscan(p, &port)
	return port
}

// proxyClosedPort returns a loopback port nothing listens on.
func proxyClosedPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	return port
}

func TestProxyHTTP(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	port := proxyUpstream(t)
	body := make([]byte, 1<<20)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	for _, tc := range []struct {
		method, path string
		body         []byte
		want         proxyEcho
	}{
		{"POST", "/echo/a%2Fb?x=1&y=two%20words&x=3", body,
			proxyEcho{Method: "POST", Path: "/echo/a/b", RawPath: "/echo/a%2Fb", Query: "x=1&y=two%20words&x=3", SHA256: hex.EncodeToString(sum[:]), Length: len(body)}},
		{"PUT", "/", []byte("small"), proxyEcho{Method: "PUT", Path: "/", RawPath: "/", Length: 5}},
		{"DELETE", "", nil, proxyEcho{Method: "DELETE", Path: "/", RawPath: "/"}},
	} {
		req, err := c.ProxyRequest(ctx, tc.method, port, tc.path, bytes.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.path == "" {
			// /proxy/{port} itself.
			req.URL.Path = strings.TrimSuffix(req.URL.Path, "/")
		}
		resp, err := c.ProxyDo(req)
		if err != nil {
			t.Fatalf("%s %s: %v", tc.method, tc.path, err)
		}
		var got proxyEcho
		err = json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if got.Token != "" {
			t.Errorf("%s %s: the access token was forwarded", tc.method, tc.path)
		}
		if !strings.HasPrefix(got.Host, "127.0.0.1:") || got.ForwardedHost == "" {
			t.Errorf("%s %s: host %q, forwarded host %q", tc.method, tc.path, got.Host, got.ForwardedHost)
		}
		got.Token, got.Host, got.ForwardedHost = "", "", ""
		if tc.want.SHA256 == "" {
			got.SHA256 = ""
		}
		if got != tc.want {
			t.Errorf("%s %s: upstream saw %+v, want %+v", tc.method, tc.path, got, tc.want)
		}
	}
}

func TestProxySSEFlushesEachEvent(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	port := proxyUpstream(t)
	req, _ := c.ProxyRequest(ctx, "GET", port, "/sse", nil)
	resp, err := c.ProxyDo(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	readUntil := func(want string) {
		t.Helper()
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("reading for %q: %v", want, err)
			}
			if strings.TrimSpace(line) == want {
				return
			}
		}
	}
	// The second event is only sent after /release, which is only sent
	// after the first event arrived: buffering would hang here.
	readUntil("data: first")
	rel, _ := c.ProxyRequest(ctx, "GET", port, "/release", nil)
	rresp, err := c.ProxyDo(rel)
	if err != nil {
		t.Fatal(err)
	}
	rresp.Body.Close()
	readUntil("data: second")
}

func TestProxyWebSocket(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	port := proxyUpstream(t)
	conn, err := c.DialProxy(ctx, port, "/ws?q=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(-1)
	big := bytes.Repeat([]byte("0123456789"), 20000)
	for _, m := range []struct {
		typ  websocket.MessageType
		data []byte
	}{{websocket.MessageText, []byte("hello through the proxy")}, {websocket.MessageBinary, big}} {
		if err := conn.Write(ctx, m.typ, m.data); err != nil {
			t.Fatal(err)
		}
		typ, data, err := conn.Read(ctx)
		if err != nil || typ != m.typ || !bytes.Equal(data, m.data) {
			t.Fatalf("echo: type %v, %d bytes, %v", typ, len(data), err)
		}
	}
	if err := conn.Close(websocket.StatusNormalClosure, ""); err != nil {
		t.Fatal(err)
	}
}

func TestProxyErrors(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	port := proxyClosedPort(t)
	req, _ := c.ProxyRequest(ctx, "GET", port, "/x", nil)
	_, err := c.ProxyDo(req)
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadGateway || ae.Code != sandbox.CodeUpstreamUnreachable || !strings.Contains(ae.Message, fmt.Sprint(port)) {
		t.Fatalf("closed port: %v", err)
	}
	if _, err := c.DialProxy(ctx, port, "/ws", nil); client.CodeOf(err) != sandbox.CodeUpstreamUnreachable {
		t.Fatalf("websocket to a closed port: %v", err)
	}
	for _, p := range []string{"0", "65536", "http", "-1"} {
		req, _ := http.NewRequestWithContext(ctx, "GET", c.BaseURL()+"/proxy/"+p+"/x", nil)
		req.Header.Set(wire.HeaderAccessToken, c.Token())
		resp, err := c.HTTPClient().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var er wire.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&er)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || er.Code != string(sandbox.CodeInvalidRequest) {
			t.Errorf("port %s: %d %+v", p, resp.StatusCode, er)
		}
	}
	// Without the token, nothing is forwarded.
	up := proxyUpstream(t)
	resp, err := http.Get(c.ProxyURL(up, "/"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without token: %d", resp.StatusCode)
	}
}

// TestProxyLeaksNothing checks that proxied requests, streams and
// WebSockets leave no goroutine or descriptor behind.
func TestProxyLeaksNothing(t *testing.T) {
	baseG, baseFD := runtime.NumGoroutine(), ptyFDs(t)
	t.Run("traffic", func(t *testing.T) {
		TestProxyHTTP(t)
		TestProxyWebSocket(t)
		TestProxySSEFlushesEachEvent(t)
	})
	ptyPoll(t, "goroutines and descriptors to be released", func() bool {
		return runtime.NumGoroutine() <= baseG && ptyFDs(t) <= baseFD
	})
}
