package execd_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// The tunnel tests play both ends on one machine: the test serves on the
// listener Client.Tunnel returns (the AstraBox server's part), and dials
// the in-box address like a program in the box would.

const tunnelToken = "tunnel-test-token"

// tunnelClient starts an execd that requires an access token and returns
// a client that has it.
func tunnelClient(t *testing.T) *client.Client {
	t.Helper()
	_, c := startCommandServer(t, execd.Config{AccessToken: tunnelToken})
	return c
}

// freeLoopbackAddr returns a loopback address nothing listens on.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// openTunnel opens a tunnel on addr, closed when the test ends. The dial's
// context is cancelled as soon as Tunnel returns: it must bound the dial
// only, so every test using the tunnel also checks that.
func openTunnel(t *testing.T, c *client.Client, addr string) net.Listener {
	t.Helper()
	ctx, cancel := context.WithCancel(testCtx(t))
	l, err := c.Tunnel(ctx, addr)
	cancel()
	if err != nil {
		t.Fatalf("tunnel %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// serveHTTP serves h on l until the test ends.
func serveHTTP(t *testing.T, l net.Listener, h http.Handler) {
	t.Helper()
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(l)
	}()
	t.Cleanup(func() {
		_ = srv.Close()
		<-done
	})
}

// boxHTTPClient is a plain HTTP client, as a program in the box has.
func boxHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// tunnelHandler is the service behind the tunnel. /sse sends one event,
// waits until release is closed, then sends a second: the second can only
// be read if the first arrived on its own. /echo answers with the request
// body and its SHA-256 in a header. /hang sends its headers, then holds
// the response open until the request ends. Any other path answers
// "hello <path>".
func tunnelHandler(release <-chan struct{}) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/sse", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: first\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		fmt.Fprint(w, "data: second\n\n")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set("X-Body-Sha256", hex.EncodeToString(sum[:]))
		_, _ = w.Write(body)
	})
	mux.HandleFunc("/hang", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	})
	return mux
}

// boxGet fetches url with hc and returns the body of a 200 answer.
func boxGet(t *testing.T, ctx context.Context, hc *http.Client, url string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s, %q, %v", url, resp.Status, body, err)
	}
	return string(body)
}

func TestTunnelHTTP(t *testing.T) {
	c := tunnelClient(t)
	addr := freeLoopbackAddr(t)
	release := make(chan struct{})
	serveHTTP(t, openTunnel(t, c, addr), tunnelHandler(release))
	hc := boxHTTPClient(t)
	base := "http://" + addr

	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context)
	}{
		{"request", func(t *testing.T, ctx context.Context) {
			if got := boxGet(t, ctx, hc, base+"/model/v1"); got != "hello /model/v1" {
				t.Fatalf("got %q", got)
			}
		}},
		{"server-sent events arrive one by one", func(t *testing.T, ctx context.Context) {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/sse", nil)
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			readEvent(t, br, "data: first")
			close(release)
			readEvent(t, br, "data: second")
		}},
		{"50 concurrent requests", func(t *testing.T, ctx context.Context) {
			var wg sync.WaitGroup
			errs := make(chan error, 50)
			for i := range 50 {
				wg.Go(func() {
					path := fmt.Sprintf("/concurrent/%d", i)
					req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
					resp, err := hc.Do(req)
					if err != nil {
						errs <- err
						return
					}
					defer resp.Body.Close()
					body, err := io.ReadAll(resp.Body)
					if err != nil || string(body) != "hello "+path {
						errs <- fmt.Errorf("GET %s: %q, %v", path, body, err)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		}},
		{"8 MiB each way", func(t *testing.T, ctx context.Context) {
			body := make([]byte, 8<<20)
			_, _ = rand.Read(body)
			sum := sha256.Sum256(body)
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/echo", bytes.NewReader(body))
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read the echo: %v", err)
			}
			if h := resp.Header.Get("X-Body-Sha256"); h != hex.EncodeToString(sum[:]) {
				t.Fatalf("the service received a body with SHA-256 %s, want %x", h, sum)
			}
			if !bytes.Equal(got, body) {
				t.Fatalf("echo of %d bytes came back as %d different bytes", len(body), len(got))
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, testCtx(t)) })
	}
}

// readEvent reads lines from br until one is want.
func readEvent(t *testing.T, br *bufio.Reader, want string) {
	t.Helper()
	for {
		line, err := br.ReadString('\n')
		if strings.TrimRight(line, "\r\n") == want {
			return
		}
		if err != nil {
			t.Fatalf("reading for %q: %v", want, err)
		}
	}
}

// TestTunnelRefused checks the answers to tunnels execd must not open.
func TestTunnelRefused(t *testing.T) {
	c := tunnelClient(t)
	live := freeLoopbackAddr(t)
	openTunnel(t, c, live)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, port, _ := net.SplitHostPort(freeLoopbackAddr(t))
	noToken := client.New(c.BaseURL())

	cases := []struct {
		name   string
		c      *client.Client
		listen string
		status int
		code   sandbox.Code
	}{
		{"no address", c, "", http.StatusBadRequest, sandbox.CodeMissingQuery},
		{"not an address", c, "nonsense", http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"no port", c, "127.0.0.1", http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"port 0", c, "127.0.0.1:0", http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"host name", c, "localhost:" + port, http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"not loopback", c, "10.1.2.3:" + port, http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"all IPv4 addresses", c, "0.0.0.0:" + port, http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"all IPv6 addresses", c, "[::]:" + port, http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"IPv4-mapped non-loopback", c, "[::ffff:10.0.0.1]:" + port, http.StatusBadRequest, sandbox.CodeInvalidRequest},
		{"already tunnelled", c, live, http.StatusConflict, sandbox.CodeConflict},
		{"in use in the box", c, busy.Addr().String(), http.StatusConflict, sandbox.CodeConflict},
		{"no access token", noToken, "127.0.0.1:" + port, http.StatusUnauthorized, sandbox.CodeUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := tc.c.Tunnel(testCtx(t), tc.listen)
			if err == nil {
				l.Close()
				t.Fatalf("tunnel %q opened, want %d %s", tc.listen, tc.status, tc.code)
			}
			var ae *client.APIError
			if !asAPIError(err, &ae) || ae.Status != tc.status || ae.Code != tc.code {
				t.Fatalf("tunnel %q: want %d %s, got %v", tc.listen, tc.status, tc.code, err)
			}
		})
	}
}

// TestTunnelTakeOver: a new holder takes a live tunnel's address over;
// the old tunnel ends and in-box requests reach the new one.
func TestTunnelTakeOver(t *testing.T) {
	c := tunnelClient(t)
	addr := freeLoopbackAddr(t)
	old := openTunnel(t, c, addr)
	serveHTTP(t, old, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "old") }))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	nl, err := c.TakeTunnel(ctx, addr)
	if err != nil {
		t.Fatalf("take over %s: %v", addr, err)
	}
	t.Cleanup(func() { nl.Close() })
	serveHTTP(t, nl, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "new") }))
	if got := boxGet(t, ctx, boxHTTPClient(t), "http://"+addr+"/"); got != "new" {
		t.Fatalf("in-box request reached %q, want the new tunnel", got)
	}
}
