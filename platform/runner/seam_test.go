package runner_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/runner"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/store/streamlog"
)

// fakeCatalog is a catalog without Agents: every Session's Agent is gone.
type fakeCatalog struct{}

func (fakeCatalog) Agent(context.Context, string) (*store.Agent, error) {
	return nil, fmt.Errorf("get agent: %w", store.ErrNotFound)
}
func (fakeCatalog) RuntimeProfile(context.Context, string) (lifecycle.Profile, error) {
	return lifecycle.Profile{}, errors.New("no profiles")
}
func (fakeCatalog) Engine(kind string) (engine.Adapter, error) {
	return nil, fmt.Errorf("engine %q not installed", kind)
}
func (fakeCatalog) ModelKey(lifecycle.Profile) (string, error) { return "", nil }
func (fakeCatalog) OpenVaults(context.Context, []string) ([]egress.Secret, error) {
	return nil, nil
}

// fakeSandboxes records the sandboxes deleted; it makes none.
type fakeSandboxes struct {
	mu      sync.Mutex
	created int
	deleted []string
}

func (f *fakeSandboxes) Backends() map[string]sandbox.Provider { return nil }
func (f *fakeSandboxes) DefaultBackend() string                { return "fake" }
func (f *fakeSandboxes) Create(context.Context, lifecycle.CreateRequest) (*store.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.created++
	return nil, errors.New("the fake makes no sandboxes")
}
func (f *fakeSandboxes) Get(_ context.Context, id string) (*store.Sandbox, error) {
	return nil, sandbox.Errorf(sandbox.CodeSandboxNotFound, "sandbox %q not found", id)
}
func (f *fakeSandboxes) Delete(_ context.Context, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, id)
	return nil
}
func (f *fakeSandboxes) Dial(context.Context, *store.Sandbox) (net.Conn, error) {
	return nil, errors.New("no boxes")
}
func (f *fakeSandboxes) AccessToken(context.Context, *store.Sandbox) (string, error) {
	return "", errors.New("no boxes")
}

// seam is a Manager over fakes and a SQLite store in a temp dir: no
// server, no API, no backend.
func seam(t *testing.T) (*runner.Manager, store.Store, *fakeSandboxes) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	boxes := &fakeSandboxes{}
	notifier := streamlog.NewLocal()
	m := runner.New(runner.Config{Catalog: fakeCatalog{}, Store: st, Sandboxes: boxes,
		Log: &streamlog.Log{Store: st, Notifier: notifier}, Notifier: notifier, Holder: "http://a",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	t.Cleanup(m.Close)
	return m, st, boxes
}

// session stores a Session in state and returns its id.
func session(t *testing.T, st store.Store, state, sandboxID string) string {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	rec := &store.Session{ID: platform.NewID("ses", now), AgentID: "agt_gone", EngineKind: "astrabox", State: state,
		SandboxID: sandboxID, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
	if err := st.CreateSession(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return rec.ID
}

// TestSeamAgentGoneFailsTheInput: a Session whose Agent the catalog no
// longer has answers its pending input with a failed reply naming
// AGENT_NOT_FOUND and is left RECOVERY_REQUIRED, without a sandbox being
// made; the runner's lease is released when it ends.
func TestSeamAgentGoneFailsTheInput(t *testing.T) {
	m, st, boxes := seam(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := session(t, st, platform.StateReady, "")
	now := time.Now().UTC().Truncate(time.Microsecond)
	in := &store.Input{ID: platform.NewID("in", now), SessionID: id, TurnID: platform.NewID("turn", now), Content: "hi",
		CreatedAt: now, UpdatedAt: now}
	if _, _, err := st.AcceptInput(ctx, in, store.LogEntry{Type: "input.accepted", TurnID: in.TurnID, InputID: in.ID,
		Payload: []byte(`{"content":"hi"}`), At: now}); err != nil {
		t.Fatal(err)
	}
	m.Wake(id)
	for {
		rec, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if rec.State == platform.StateRecoveryRequired {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session state %s, want %s", rec.State, platform.StateRecoveryRequired)
		case <-time.After(10 * time.Millisecond):
		}
	}
	entries, err := st.ReadStream(ctx, id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var failure string
	for _, e := range entries {
		if e.Type == "data-turn-failure" {
			failure = string(e.Payload)
		}
	}
	if !strings.Contains(failure, string(platform.CodeAgentNotFound)) {
		t.Fatalf("failure frame %q does not name %s; log: %v", failure, platform.CodeAgentNotFound, entries)
	}
	pending, err := st.ListInputs(ctx, id, store.InputAccepted, store.InputDelivered)
	if err != nil || len(pending) != 0 {
		t.Fatalf("pending inputs %v (%v), want none", pending, err)
	}
	boxes.mu.Lock()
	created := boxes.created
	boxes.mu.Unlock()
	if created != 0 {
		t.Fatalf("%d sandboxes created for a Session without an Agent", created)
	}
	for {
		h, err := m.Holder(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if h == "" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("lease still held by %s", h)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestSeamReleaseDeletesTheSandbox: Release deletes the Session's sandbox
// through the sandbox service, and releasing a Session that is gone is
// not an error.
func TestSeamReleaseDeletesTheSandbox(t *testing.T) {
	m, st, boxes := seam(t)
	ctx := context.Background()
	id := session(t, st, platform.StateTerminated, "sbx_1")
	if err := m.Release(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := m.Release(ctx, "ses_unknown"); err != nil {
		t.Fatalf("release of an unknown session: %v", err)
	}
	boxes.mu.Lock()
	defer boxes.mu.Unlock()
	if len(boxes.deleted) != 1 || boxes.deleted[0] != "sbx_1" {
		t.Fatalf("deleted %v, want [sbx_1]", boxes.deleted)
	}
}

// leaseCounter is a store that counts the leases taken.
type leaseCounter struct {
	store.Store
	taken atomic.Int64
}

func (c *leaseCounter) AcquireLease(ctx context.Context, stream, holder string, ttl time.Duration) (store.Lease, error) {
	c.taken.Add(1)
	return c.Store.AcquireLease(ctx, stream, holder, ttl)
}

// TestSeamIdleSessionSleeps: a woken Session with nothing to do (no
// runtime, no input: RECOVERY_REQUIRED after a lost runtime, READY after
// a released one, or deleted) gets one runner, which ends and stays
// ended: its lease is taken once (a deleted Session's never), not again
// and again by runner after runner.
func TestSeamIdleSessionSleeps(t *testing.T) {
	_, st, _ := seam(t)
	for _, tc := range []struct {
		state string
		want  int64
	}{{platform.StateRecoveryRequired, 1}, {platform.StateReady, 1}, {platform.StateDeleted, 0}} {
		t.Run(tc.state, func(t *testing.T) {
			counter := &leaseCounter{Store: st}
			notifier := streamlog.NewLocal()
			m := runner.New(runner.Config{Catalog: fakeCatalog{}, Store: counter, Sandboxes: &fakeSandboxes{},
				Log: &streamlog.Log{Store: st, Notifier: notifier}, Notifier: notifier, Holder: "http://a",
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			defer m.Close()
			id := session(t, st, tc.state, "")
			m.Wake(id)
			time.Sleep(500 * time.Millisecond) // many runners' worth, were they started one after another
			if got := counter.taken.Load(); got != tc.want {
				t.Fatalf("the lease was taken %d times after one wake-up, want %d: runners keep starting", got, tc.want)
			}
		})
	}
}

// TestSeamHalfBuiltBoxIsDeleted: a Session whose record names a box but
// no runtime (its holder stopped between the two during a build) has that
// box deleted by its next runner, and the record no longer names it.
func TestSeamHalfBuiltBoxIsDeleted(t *testing.T) {
	m, st, boxes := seam(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	id := session(t, st, platform.StateCreating, "sbx_half")
	m.Wake(id)
	for {
		rec, err := st.GetSession(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		boxes.mu.Lock()
		deleted := slices.Clone(boxes.deleted)
		boxes.mu.Unlock()
		if rec.SandboxID == "" && slices.Contains(deleted, "sbx_half") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("session names sandbox %q, deleted %v; want sbx_half deleted and unnamed", rec.SandboxID, deleted)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
