package platformapi

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
)

// memResponse is an in-memory http.ResponseWriter (and Flusher), safe to
// read while a stream writes to it; after fail, every write fails (a
// client that left).
type memResponse struct {
	mu      sync.Mutex
	hdr     http.Header
	body    strings.Builder
	writes  int
	flushes int
	failing bool
}

func (m *memResponse) Header() http.Header {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.hdr == nil {
		m.hdr = http.Header{}
	}
	return m.hdr
}
func (m *memResponse) WriteHeader(int) {}
func (m *memResponse) Write(b []byte) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		return 0, errors.New("client gone")
	}
	m.writes++
	return m.body.Write(b)
}
func (m *memResponse) Flush() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.flushes++
}
func (m *memResponse) fail() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failing = true
}

// sent returns what was written and how many writes and flushes.
func (m *memResponse) sent() (string, int, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.body.String(), m.writes, m.flushes
}

// TestKeepalive: an idle stream gets a flushed ": keepalive" comment every
// keepaliveEvery, none sooner, and none once stopped; stop returns once
// the keepalive has ended. Time is the bubble's: nothing waits for real.
func TestKeepalive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &memResponse{}
		stop := startKeepalive(t.Context(), sse.NewWriter(w))
		start := time.Now()

		time.Sleep(keepaliveEvery - time.Nanosecond)
		synctest.Wait()
		if body, n, _ := w.sent(); n != 0 {
			t.Fatalf("%v before the interval: %d writes %q, want none", time.Since(start), n, body)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		const comment = ": keepalive\n\n"
		if body, n, flushes := w.sent(); n != 1 || body != comment || flushes != 1 {
			t.Fatalf("at the interval: %d writes %q, %d flushes; want one flushed %q", n, body, flushes, comment)
		}
		if got := w.Header().Get("Content-Type"); got != "text/event-stream" {
			t.Fatalf("Content-Type %q", got)
		}
		time.Sleep(keepaliveEvery)
		synctest.Wait()
		if body, n, _ := w.sent(); n != 2 || body != comment+comment {
			t.Fatalf("after two intervals: %d writes %q, want two comments", n, body)
		}

		stop() // returns: the keepalive ended
		time.Sleep(10 * keepaliveEvery)
		synctest.Wait()
		if _, n, _ := w.sent(); n != 2 {
			t.Fatalf("%d writes after stop, want none more", n-2)
		}
		if elapsed := time.Since(start); elapsed != 12*keepaliveEvery {
			t.Fatalf("the bubble's clock moved %v, want %v", elapsed, 12*keepaliveEvery)
		}
	})
}

// TestKeepaliveEnds: the keepalive ends with its request's context, and
// at the first comment that cannot be written (the client left).
func TestKeepaliveEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		ended := make(chan struct{})
		go func() {
			defer close(ended)
			keepalive(ctx, sse.NewWriter(&memResponse{}))
		}()
		time.Sleep(keepaliveEvery / 2)
		cancel()
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Fatal("the keepalive outlived its context")
		}

		w := &memResponse{}
		w.fail()
		ended = make(chan struct{})
		go func() {
			defer close(ended)
			keepalive(t.Context(), sse.NewWriter(w))
		}()
		time.Sleep(keepaliveEvery - time.Nanosecond)
		synctest.Wait()
		select {
		case <-ended:
			t.Fatal("the keepalive ended before it wrote")
		default:
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case <-ended:
		default:
			t.Fatal("the keepalive went on after a failed write")
		}
	})
}

// TestWatchAccessEnds: a stream's context ends, with cause errAccessEnded,
// at the first check (ReauthorizeEvery) that finds the caller's access
// gone, and after maxReauthFailures checks in a row that fail otherwise;
// before that it lasts.
func TestWatchAccessEnds(t *testing.T) {
	const every = 3 * time.Second
	tests := []struct {
		name   string
		err    error
		checks int // the check that ends the stream
	}{
		{"access ended", identity.Forbidden("no longer"), 1},
		{"key revoked", sandbox.Errorf(sandbox.CodeUnauthorized, "revoked"), 1},
		{"store not answering", errors.New("store down"), maxReauthFailures},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				checks := 0
				h := New(Config{ReauthorizeEvery: every, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
					Reauthorize: func(*http.Request) (*identity.Principal, error) {
						mu.Lock()
						defer mu.Unlock()
						checks++
						return nil, tc.err
					}})
				r := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/api/v1/sessions/ses_1/events", nil)
				ctx, stop := h.watchAccess(r, "ses_1")
				defer stop()

				time.Sleep(time.Duration(tc.checks)*every - time.Nanosecond)
				synctest.Wait()
				if ctx.Err() != nil {
					t.Fatalf("the stream ended after %d checks, want %d", checks, tc.checks)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !errors.Is(context.Cause(ctx), errAccessEnded) {
					t.Fatalf("after %d checks the stream's cause is %v, want errAccessEnded", checks, context.Cause(ctx))
				}
				time.Sleep(10 * every)
				synctest.Wait()
				mu.Lock()
				defer mu.Unlock()
				if checks != tc.checks {
					t.Fatalf("%d checks, want %d and none after the end", checks, tc.checks)
				}
			})
		})
	}
}
