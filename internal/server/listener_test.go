package server

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serveLimited serves a plain handler on a loopback listener wrapped by
// LimitListener(total, perIP) and returns its address.
func serveLimited(t *testing.T, total, perIP int) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })}
	go func() { _ = hs.Serve(LimitListener(l, total, perIP, slog.New(slog.DiscardHandler))) }()
	t.Cleanup(func() { hs.Close() })
	return l.Addr().String()
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// get sends one request on c and returns the status, or the error that
// ended the read (before deadline, which only guards against a hang).
func get(c net.Conn, deadline time.Duration) (int, error) {
	_ = c.SetDeadline(time.Now().Add(deadline))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return 0, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// TestLimitListenerPerIP checks that a client address holding perIP
// connections gets its next one closed at once, and another once one of
// its connections closes.
func TestLimitListenerPerIP(t *testing.T) {
	addr := serveLimited(t, 0, 2)
	a, b := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{a, b} { // both accepted and served
		if st, err := get(c, 20*time.Second); err != nil || st != 200 {
			t.Fatalf("within the bound: %d %v", st, err)
		}
	}
	if _, err := get(dial(t, addr), 20*time.Second); !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("third connection from one address: %v, want it closed", err)
	}
	a.Close()
	deadline := time.Now().Add(20 * time.Second)
	for { // the server notices a's close on its next read
		if st, err := get(dial(t, addr), 20*time.Second); err == nil && st == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no connection admitted after one closed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLimitListenerTotal checks that beyond total open connections the
// next is not served until one closes.
func TestLimitListenerTotal(t *testing.T) {
	addr := serveLimited(t, 2, 0)
	a, b := dial(t, addr), dial(t, addr)
	for _, c := range []net.Conn{a, b} {
		if st, err := get(c, 20*time.Second); err != nil || st != 200 {
			t.Fatalf("within the bound: %d %v", st, err)
		}
	}
	c := dial(t, addr) // connected by the kernel, not accepted
	var ne net.Error
	if _, err := get(c, 300*time.Millisecond); !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("third connection answered while two are open: %v", err)
	}
	a.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil) // the request sent above
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after one closed: %v", err)
	}
}

// flakyListener fails its first n Accepts with err, then hands out one
// end of a pipe per Accept until closed.
type flakyListener struct {
	n      atomic.Int32
	err    error
	closed chan struct{}
}

func (f *flakyListener) Accept() (net.Conn, error) {
	if f.n.Add(-1) >= 0 {
		return nil, f.err
	}
	select {
	case <-f.closed:
		return nil, net.ErrClosed
	default:
	}
	c, _ := net.Pipe()
	return c, nil
}
func (f *flakyListener) Close() error   { close(f.closed); return nil }
func (f *flakyListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// TestLimitListenerRetriesAcceptErrors checks that accept errors (out of
// file descriptors) are retried rather than returned, which would stop
// http.Server.Serve, and that closing ends Accept with net.ErrClosed.
func TestLimitListenerRetriesAcceptErrors(t *testing.T) {
	f := &flakyListener{err: &net.OpError{Op: "accept", Err: syscall.EMFILE}, closed: make(chan struct{})}
	f.n.Store(5)
	l := LimitListener(f, 1, 0, slog.New(slog.DiscardHandler)).(*limitListener)
	l.minBackoff, l.maxBackoff = time.Microsecond, 10*time.Microsecond
	c, err := l.Accept()
	if err != nil || f.n.Load() >= 0 {
		t.Fatalf("Accept = %v, %v after %d errors left", c, err, f.n.Load())
	}
	done := make(chan error, 1)
	go func() { _, err := l.Accept(); done <- err }() // waits: the one slot is c's
	l.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Fatalf("Accept after Close = %v", err)
	}
	c.Close()
	c.Close() // a second Close gives nothing back twice
	if n := len(l.slots); n != 0 {
		t.Fatalf("%d slots held after every connection closed", n)
	}
}

func TestHTTPLimitsDefaults(t *testing.T) {
	got := HTTPLimits{BodyReadTimeout: time.Second, MaxConnectionsPerIP: -1, IdleTimeout: -1}.withDefaults()
	want := HTTPLimits{ReadHeaderTimeout: DefaultReadHeaderTimeout, BodyReadTimeout: time.Second, IdleTimeout: 0,
		MaxConnections: DefaultMaxConnections, MaxConnectionsPerIP: 0}
	if got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
}
