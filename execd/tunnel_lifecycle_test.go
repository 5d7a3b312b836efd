package execd_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/sandbox"
)

// TestTunnelCloseEndsEverything closes the listener while a response is
// in flight: the in-box connection must end in error (not look like a
// complete response), new connections must be refused, and the address
// must be free for a new tunnel.
func TestTunnelCloseEndsEverything(t *testing.T) {
	c := tunnelClient(t)
	addr := freeLoopbackAddr(t)
	ctx := testCtx(t)
	l := openTunnel(t, c, addr)
	serveHTTP(t, l, tunnelHandler(nil))
	hc := boxHTTPClient(t)

	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/hang", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET /hang: %v", err)
	}
	defer resp.Body.Close()
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, resp.Body)
		ended <- err
	}()

	if err := l.Close(); err != nil {
		t.Fatalf("close the tunnel: %v", err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close: want net.ErrClosed, got %v", err)
	}
	select {
	case err := <-ended:
		if err == nil {
			t.Fatal("the in-flight response ended as if complete")
		}
	case <-ctx.Done():
		t.Fatal("the in-flight response did not end with the tunnel")
	}
	wait.Until(t, 30*time.Second, "in-box dials to be refused", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err != nil
	})

	l2 := reopenTunnel(t, c, addr)
	serveHTTP(t, l2, tunnelHandler(nil))
	if got := boxGet(t, ctx, boxHTTPClient(t), "http://"+addr+"/again"); got != "hello /again" {
		t.Fatalf("through the new tunnel: got %q", got)
	}
}

// reopenTunnel opens a tunnel on addr, retrying while execd still tears
// down the previous one (CONFLICT).
func reopenTunnel(t *testing.T, c *client.Client, addr string) net.Listener {
	t.Helper()
	var l net.Listener
	wait.Until(t, 30*time.Second, "the address to be free for a new tunnel", func() bool {
		var err error
		l, err = c.Tunnel(testCtx(t), addr)
		if err != nil && client.CodeOf(err) != sandbox.CodeConflict {
			t.Fatalf("reopen tunnel %s: %v", addr, err)
		}
		return err == nil
	})
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestTunnelHalfClose checks that each side can finish sending while the
// other still sends, with the raw conns of both ends.
func TestTunnelHalfClose(t *testing.T) {
	c := tunnelClient(t)
	addr := freeLoopbackAddr(t)
	l := openTunnel(t, c, addr)

	cases := []struct {
		name string
		// serve runs on the accepted conn; box on the in-box connection.
		serve func(conn net.Conn) error
		box   func(conn *net.TCPConn) error
	}{
		{
			name: "the box finishes first",
			serve: func(conn net.Conn) error {
				got, err := io.ReadAll(conn)
				if err != nil {
					return err
				}
				if _, err := conn.Write(append([]byte("got "), got...)); err != nil {
					return err
				}
				return conn.Close()
			},
			box: func(conn *net.TCPConn) error {
				if _, err := conn.Write([]byte("ping")); err != nil {
					return err
				}
				if err := conn.CloseWrite(); err != nil {
					return err
				}
				return expectRead(conn, "got ping")
			},
		},
		{
			name: "the service finishes first",
			serve: func(conn net.Conn) error {
				defer conn.Close()
				if _, err := conn.Write([]byte("hello")); err != nil {
					return err
				}
				cw, ok := conn.(interface{ CloseWrite() error })
				if !ok {
					return errors.New("an accepted conn has no CloseWrite")
				}
				if err := cw.CloseWrite(); err != nil {
					return err
				}
				return expectRead(conn, "world")
			},
			box: func(conn *net.TCPConn) error {
				if err := expectRead(conn, "hello"); err != nil {
					return err
				}
				if _, err := conn.Write([]byte("world")); err != nil {
					return err
				}
				if err := conn.CloseWrite(); err != nil {
					return err
				}
				return expectRead(conn, "")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			served := make(chan error, 1)
			go func() {
				conn, err := l.Accept()
				if err != nil {
					served <- err
					return
				}
				if conn.LocalAddr().String() != addr {
					served <- errors.New("LocalAddr is " + conn.LocalAddr().String() + ", want " + addr)
					conn.Close()
					return
				}
				served <- tc.serve(conn)
			}()
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
			if err := tc.box(conn.(*net.TCPConn)); err != nil {
				t.Fatalf("in the box: %v", err)
			}
			if err := <-served; err != nil {
				t.Fatalf("the service: %v", err)
			}
		})
	}
}

// expectRead reads r to its end and checks it was want.
func expectRead(r io.Reader, want string) error {
	got, err := io.ReadAll(bufio.NewReader(r))
	if err != nil {
		return err
	}
	if string(got) != want {
		return errors.New("read " + string(got) + ", want " + want)
	}
	return nil
}

// TestTunnelClientGone drops the connection under the tunnel's WebSocket
// without a closing handshake, as when the server's host goes away: execd
// must still end the tunnel, reset what it relays and free the address,
// and the client's Accept must report the tunnel ended.
func TestTunnelClientGone(t *testing.T) {
	c := tunnelClient(t)
	u, err := url.Parse(c.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var raw []net.Conn
	dropping := client.New(c.BaseURL(), client.WithToken(tunnelToken), client.WithDialer(func(ctx context.Context) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", u.Host)
		if err == nil {
			mu.Lock()
			raw = append(raw, conn)
			mu.Unlock()
		}
		return conn, err
	}))
	addr := freeLoopbackAddr(t)
	l := openTunnel(t, dropping, addr)
	accepted := make(chan net.Conn, 1)
	go func() {
		if conn, err := l.Accept(); err == nil {
			accepted <- conn
		}
	}()
	in, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	select {
	case conn := <-accepted:
		defer conn.Close()
	case <-testCtx(t).Done():
		t.Fatal("the in-box connection was not accepted")
	}

	mu.Lock()
	for _, conn := range raw {
		conn.Close()
	}
	mu.Unlock()
	_ = in.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := in.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the relayed connection did not end with the tunnel: %v", err)
	}
	// The cause wraps net.ErrClosed here only because the test closed the
	// raw connection itself; the error must say the tunnel ended.
	if _, err := l.Accept(); err == nil || !strings.Contains(err.Error(), "ended") {
		t.Fatalf("Accept after the tunnel ended: want an error saying so, got %v", err)
	}
	reopenTunnel(t, c, addr)
}
