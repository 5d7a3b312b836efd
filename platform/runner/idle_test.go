package runner

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// The timing of a runner's lease and of its idle release, run in a
// synctest bubble against fakes in memory: the timers are the bubble's,
// so the tests check the exact instant and never wait for real.

// memStore is the part of a Store the lease and idle paths use, in
// memory; any other method panics (the embedded Store is nil), which
// tells a test that the path now does more than it knew.
type memStore struct {
	Store
	mu      sync.Mutex
	session store.Session
	inputs  []*store.Input
	renews  []time.Time // when RenewLease was called
	fenced  bool        // RenewLease answers store.ErrFenced
}

func (s *memStore) GetSession(_ context.Context, id string) (*store.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.session.ID {
		return nil, store.ErrNotFound
	}
	c := s.session
	return &c, nil
}

func (s *memStore) UpdateSession(_ context.Context, rec *store.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.session = *rec
	return nil
}

func (s *memStore) ListInputs(_ context.Context, _ string, states ...string) ([]*store.Input, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*store.Input
	for _, in := range s.inputs {
		if len(states) == 0 || slices.Contains(states, in.State) {
			out = append(out, in)
		}
	}
	return out, nil
}

func (s *memStore) RenewLease(_ context.Context, _, holder string, epoch int64, ttl time.Duration) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renews = append(s.renews, time.Now())
	if s.fenced {
		return store.Lease{}, store.ErrFenced
	}
	return store.Lease{Holder: holder, Epoch: epoch, ExpiresAt: time.Now().Add(ttl)}, nil
}

func (s *memStore) state() (store.Session, []time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.session, slices.Clone(s.renews)
}

// memLog keeps the entries appended.
type memLog struct {
	mu      sync.Mutex
	entries []store.LogEntry
}

func (l *memLog) Append(_ context.Context, _ string, _ int64, entries ...store.LogEntry) ([]store.LogEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries = append(l.entries, entries...)
	return entries, nil
}

// quietNotifier never notifies.
type quietNotifier struct{}

func (quietNotifier) Notify(string) {}
func (quietNotifier) Subscribe(string) (<-chan struct{}, func()) {
	return make(chan struct{}), func() {}
}

// deletingSandboxes records the sandboxes deleted (and when).
type deletingSandboxes struct {
	mu      sync.Mutex
	deleted []string
	at      []time.Time
}

func (d *deletingSandboxes) Backends() map[string]sandbox.Provider { return nil }
func (d *deletingSandboxes) DefaultBackend() string                { return "fake" }
func (d *deletingSandboxes) Create(context.Context, lifecycle.CreateRequest) (*store.Sandbox, error) {
	return nil, errors.New("the fake makes no sandboxes")
}
func (d *deletingSandboxes) Get(_ context.Context, id string) (*store.Sandbox, error) {
	return nil, sandbox.Errorf(sandbox.CodeSandboxNotFound, "sandbox %q not found", id)
}
func (d *deletingSandboxes) Delete(_ context.Context, id, _ string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deleted = append(d.deleted, id)
	d.at = append(d.at, time.Now())
	return nil
}
func (d *deletingSandboxes) Dial(context.Context, *store.Sandbox) (net.Conn, error) {
	return nil, errors.New("no boxes")
}
func (d *deletingSandboxes) AccessToken(context.Context, *store.Sandbox) (string, error) {
	return "", errors.New("no boxes")
}

func (d *deletingSandboxes) state() ([]string, []time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.deleted), slices.Clone(d.at)
}

// idleFixture is a runner of Session ses_1 with a live runtime in box
// sbx_1 (a fake: no program, no execd) whose events the test sends, over
// the fakes. It must be made inside the bubble: a goroutine blocked on a
// channel made outside it is not durably blocked.
type idleFixture struct {
	r     *runner
	st    *memStore
	boxes *deletingSandboxes
	log   *memLog
}

func newIdleFixture(t *testing.T, cfg Config, profileIdle time.Duration) *idleFixture {
	t.Helper()
	st := &memStore{session: store.Session{ID: "ses_1", State: platform.StateReady, SandboxID: "sbx_1", Runtime: []byte(`{"command_id":"cmd_1"}`)}}
	boxes := &deletingSandboxes{}
	log := &memLog{}
	cfg.Store, cfg.Sandboxes, cfg.Log, cfg.Notifier = st, boxes, log, quietNotifier{}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	m := New(cfg)
	t.Cleanup(m.stop)
	r := newRunner(m, "ses_1")
	r.epoch = 7
	r.rt = &runtime{box: &store.Sandbox{ID: "sbx_1"}, idle: profileIdle, sent: map[string]bool{},
		events: make(chan batch), ended: make(chan error)}
	return &idleFixture{r: r, st: st, boxes: boxes, log: log}
}

// waitResult is what runner.wait returned.
type waitResult struct {
	more bool
	err  error
}

// startWait runs r.wait in a goroutine and returns where its result goes.
func (f *idleFixture) startWait() <-chan waitResult {
	res := make(chan waitResult, 1)
	go func() {
		more, err := f.r.wait(f.r.ctx)
		res <- waitResult{more, err}
	}()
	return res
}

// released reports whether the runtime was released: its box deleted and
// the Session TERMINATED without a sandbox, after a lease check.
func (f *idleFixture) released(t *testing.T) bool {
	t.Helper()
	deleted, _ := f.boxes.state()
	sess, renews := f.st.state()
	if len(deleted) == 0 {
		if sess.State != platform.StateReady || sess.SandboxID != "sbx_1" {
			t.Fatalf("session %s, sandbox %q, without the box deleted", sess.State, sess.SandboxID)
		}
		return false
	}
	if !slices.Equal(deleted, []string{"sbx_1"}) {
		t.Fatalf("deleted %v, want [sbx_1]", deleted)
	}
	if sess.State != platform.StateTerminated || sess.SandboxID != "" || sess.Runtime != nil {
		t.Fatalf("released session %s, sandbox %q, runtime %s; want TERMINATED and neither", sess.State, sess.SandboxID, sess.Runtime)
	}
	if len(renews) == 0 {
		t.Fatal("the box was deleted without confirming the lease")
	}
	return true
}

// TestIdleRelease: a runtime with no reply in progress and no pending
// input is released once it has been idle its profile's idle timeout (the
// server's when the profile names none): not a nanosecond sooner, and
// each output of the program starts the wait again.
func TestIdleRelease(t *testing.T) {
	tests := []struct {
		name        string
		profileIdle time.Duration
		serverIdle  time.Duration
		want        time.Duration
	}{
		{"profile's timeout", 5 * time.Minute, time.Hour, 5 * time.Minute},
		{"server's timeout", 0, 7 * time.Minute, 7 * time.Minute},
		{"server's default", 0, 0, 30 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newIdleFixture(t, Config{IdleTimeout: tc.serverIdle}, tc.profileIdle)
				start := time.Now()
				res := f.startWait()
				time.Sleep(tc.want - time.Nanosecond)
				synctest.Wait()
				if f.released(t) || len(res) != 0 {
					t.Fatalf("released after %v, want %v", time.Since(start), tc.want)
				}
				time.Sleep(time.Nanosecond)
				synctest.Wait()
				if !f.released(t) {
					t.Fatalf("not released after %v", time.Since(start))
				}
				if got := <-res; got.more || got.err != nil {
					t.Fatalf("wait returned %v, %v; want the runner to end (false, nil)", got.more, got.err)
				}
				if _, at := f.boxes.state(); !at[0].Equal(start.Add(tc.want)) {
					t.Fatalf("box deleted at +%v, want +%v", at[0].Sub(start), tc.want)
				}
				if f.r.rt != nil {
					t.Fatal("the runtime is still attached")
				}
				f.log.mu.Lock()
				defer f.log.mu.Unlock()
				if len(f.log.entries) != 1 || f.log.entries[0].Type != "state.changed" {
					t.Fatalf("log %v, want one state.changed", f.log.entries)
				}
			})
		})
	}
}

// TestIdleReleaseWaitsFromTheLastOutput: output of the program (any
// batch of events) restarts the idle timeout.
func TestIdleReleaseWaitsFromTheLastOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 5 * time.Minute
		f := newIdleFixture(t, Config{}, idle)
		start := time.Now()
		res := f.startWait()
		time.Sleep(3 * time.Minute)
		f.r.rt.events <- batch{}
		time.Sleep(idle - time.Nanosecond) // 8 min - 1 ns: 3 min past the first timeout
		synctest.Wait()
		if f.released(t) || len(res) != 0 {
			t.Fatalf("released after %v, %v after the last output", time.Since(start), idle-time.Nanosecond)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !f.released(t) {
			t.Fatalf("not released %v after the last output", idle)
		}
		if got := <-res; got.more || got.err != nil {
			t.Fatalf("wait returned %v, %v", got.more, got.err)
		}
	})
}

// TestIdleKeepsBusyOrPendingRuntimes: a runtime is not released while a
// reply is in progress, however long it runs, nor while an input waits
// (the runner steps again instead).
func TestIdleKeepsBusyOrPendingRuntimes(t *testing.T) {
	const idle = 5 * time.Minute
	t.Run("reply in progress", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newIdleFixture(t, Config{}, idle)
			f.r.turn = &turn{id: "turn_1", inputID: "in_1", started: time.Now()}
			res := f.startWait()
			time.Sleep(10 * idle)
			synctest.Wait()
			if f.released(t) || len(res) != 0 {
				t.Fatal("a runtime with a reply in progress was released")
			}
			f.r.cancel()
			if got := <-res; !errors.Is(got.err, context.Canceled) {
				t.Fatalf("wait returned %v, %v after its context ended", got.more, got.err)
			}
			if f.released(t) {
				t.Fatal("released when the runner stopped")
			}
		})
	})
	t.Run("input pending", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newIdleFixture(t, Config{}, idle)
			// Delivered and not yet consumed: the input poll (accepted
			// inputs not sent) does not see it; the idle check does.
			f.st.inputs = []*store.Input{{ID: "in_1", SessionID: "ses_1", State: store.InputDelivered}}
			f.r.rt.sent["in_1"] = true
			start := time.Now()
			res := f.startWait()
			time.Sleep(idle - time.Nanosecond)
			synctest.Wait()
			if len(res) != 0 {
				t.Fatalf("wait returned after %v, before the idle timeout", time.Since(start))
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if got := <-res; !got.more || got.err != nil {
				t.Fatalf("wait returned %v, %v at the idle timeout with an input pending; want another step", got.more, got.err)
			}
			if f.released(t) {
				t.Fatal("a runtime with an input pending was released")
			}
		})
	})
}

// TestRenewKeepsTheLease: the lease is renewed every third of its TTL
// from when the runner took it, never sooner, until the runner ends; a
// renewal the store fences (another replica holds the Session) stops the
// runner at once.
func TestRenewKeepsTheLease(t *testing.T) {
	const ttl = 9 * time.Second
	t.Run("renewed every third of the TTL", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newIdleFixture(t, Config{LeaseTTL: ttl}, 0)
			start := time.Now()
			done := make(chan struct{})
			go f.r.renew(done)
			time.Sleep(ttl/3 - time.Nanosecond)
			synctest.Wait()
			if _, renews := f.st.state(); len(renews) != 0 {
				t.Fatalf("renewed %d times before a third of the TTL", len(renews))
			}
			time.Sleep(time.Nanosecond + 3*ttl)
			synctest.Wait()
			_, renews := f.st.state()
			var want []time.Time
			for i := 1; i <= 10; i++ {
				want = append(want, start.Add(time.Duration(i)*ttl/3))
			}
			if !slices.EqualFunc(renews, want, time.Time.Equal) {
				t.Fatalf("renewed at %v, want every %v from %v: %v", renews, ttl/3, start, want)
			}
			if f.r.ctx.Err() != nil {
				t.Fatal("renewing stopped the runner")
			}
			f.r.cancel()
			synctest.Wait()
			select {
			case <-done:
			default:
				t.Fatal("renew outlived its runner")
			}
			time.Sleep(10 * ttl)
			if _, after := f.st.state(); len(after) != len(renews) {
				t.Fatalf("renewed %d times after the runner ended", len(after)-len(renews))
			}
		})
	})
	t.Run("a fenced renewal stops the runner", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			f := newIdleFixture(t, Config{LeaseTTL: ttl}, 0)
			f.st.fenced = true
			done := make(chan struct{})
			go f.r.renew(done)
			time.Sleep(ttl/3 - time.Nanosecond)
			synctest.Wait()
			if f.r.ctx.Err() != nil {
				t.Fatal("the runner stopped before its lease was renewed")
			}
			time.Sleep(time.Nanosecond)
			synctest.Wait()
			if f.r.ctx.Err() == nil {
				t.Fatal("a fenced renewal left the runner running")
			}
			select {
			case <-done:
			default:
				t.Fatal("renew went on after a fenced renewal")
			}
			if _, renews := f.st.state(); len(renews) != 1 {
				t.Fatalf("%d renewals, want the one fenced", len(renews))
			}
		})
	})
}
