// Package runner holds Sessions' runtimes: for each Session with work it
// takes the Session's lease, builds or re-attaches the sandbox and the
// agent program in it, delivers inputs in order, reads the program's
// output by byte offset, records what the program reports in the durable
// log, and releases the runtime when it idles. One goroutine owns each
// Session's state; everything else talks to it through channels.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Config configures a Manager.
type Config struct {
	// Catalog, Store, Sandboxes, Log and Notifier are required: what the
	// runners read (Agents, profiles, engines, keys, vaults), the records
	// they keep, the sandboxes they run programs in, the log they record
	// output on, and the wake-ups they hear and send.
	Catalog   Catalog
	Store     Store
	Sandboxes Sandboxes
	Log       Log
	Notifier  Notifier
	// Holder names this replica in leases (its advertised URL).
	Holder string
	// LeaseTTL is a Session lease's lifetime (default 10 s), renewed every
	// third of it.
	LeaseTTL time.Duration
	// IdleTimeout releases a runtime idle this long when its profile names
	// no idle timeout (default 30 minutes).
	IdleTimeout time.Duration
	// DrainTimeout bounds how long Close lets replies in progress finish
	// before it stops their runners (default 20 s).
	DrainTimeout time.Duration
	// Egress is the egress proxy that delivers the secrets of Agents'
	// vaults into their Sessions' boxes (see delivery.go); nil: Sessions of
	// Agents with vaults fail to start with PROTECTED_DELIVERY_UNSUPPORTED.
	Egress *egress.Manager
	// ModelClient forwards model traffic (default: newModelClient's, with
	// no total timeout, since streams are long).
	ModelClient *http.Client
	// Limits are the limits of Sessions whose profile sets none (see
	// limits.go); zero fields take DefaultLimits'. They must be valid
	// (lifecycle.SessionLimits.Validate).
	Limits lifecycle.SessionLimits
	Logger *slog.Logger
}

// Manager runs the runners of this replica. It implements
// platform.Runtimes.
type Manager struct {
	cfg  Config
	st   Store
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc

	mu      sync.Mutex
	runners map[string]*runner
	wg      sync.WaitGroup
	// draining is closed when Close begins: runners finish the reply in
	// progress, start no new one, and hand their Sessions over.
	draining  chan struct{}
	drainOnce sync.Once
}

// New returns a Manager; Close stops its runners.
func New(cfg Config) *Manager {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 10 * time.Second
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = 30 * time.Minute
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ModelClient == nil {
		cfg.ModelClient = newModelClient()
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 20 * time.Second
	}
	cfg.Limits = cfg.Limits.Or(DefaultLimits)
	ctx, stop := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, st: cfg.Store, log: cfg.Logger, ctx: ctx, stop: stop, runners: map[string]*runner{},
		draining: make(chan struct{})}
}

// Wake implements platform.Runtimes: it starts the Session's runner if none
// runs here, and pokes it.
func (m *Manager) Wake(sessionID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	select {
	case <-m.draining:
		if m.runners[sessionID] == nil {
			return // shutting down: no new runtimes here
		}
	default:
	}
	r := m.runners[sessionID]
	if r == nil {
		r = newRunner(m, sessionID)
		m.runners[sessionID] = r
		m.wg.Go(func() {
			r.run()
			m.mu.Lock()
			if m.runners[sessionID] == r {
				delete(m.runners, sessionID)
			}
			m.mu.Unlock()
			// Work that came while the runner was ending gets a new one.
			select {
			case <-r.wake:
				if r.ctx.Err() == nil || m.ctx.Err() == nil {
					m.Wake(sessionID)
				}
			default:
			}
		})
	}
	r.poke()
}

func (m *Manager) get(sessionID string) *runner {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runners[sessionID]
}

// Release implements platform.Runtimes: it stops the Session's runner and
// deletes its sandbox.
func (m *Manager) Release(ctx context.Context, sessionID string) error {
	if r := m.get(sessionID); r != nil {
		r.shutdown(true)
		select {
		case <-r.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	rec, err := m.st.GetSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release session: %w", err)
	}
	if rec.SandboxID != "" {
		if err := m.cfg.Sandboxes.Delete(ctx, rec.SandboxID, "session deleted"); err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
			return fmt.Errorf("release session sandbox: %w", err)
		}
	}
	return nil
}

// ResumeAll wakes every Session that has a runtime or work, so that a
// restarted server re-attaches to running programs and answers queued
// inputs.
func (m *Manager) ResumeAll(ctx context.Context) error {
	recs, err := m.st.ListSessions(ctx, store.SessionFilter{States: []string{platform.StateCreating, platform.StateReady,
		platform.StateBusy, platform.StateInterrupting, platform.StateRecoveryRequired}})
	if err != nil {
		return fmt.Errorf("resume sessions: %w", err)
	}
	for _, rec := range recs {
		m.Wake(rec.ID)
	}
	return nil
}

// Close stops every runner, leaving programs and sandboxes running (a new
// server re-attaches to them) and releasing leases.
func (m *Manager) Close() {
	// Replies in progress finish first (bounded), so that a rolling
	// restart cuts none: their model streams run through this replica.
	m.drainOnce.Do(func() { close(m.draining) })
	m.mu.Lock()
	rs := make([]*runner, 0, len(m.runners))
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	m.awaitReplies(rs)
	m.mu.Lock()
	m.stop()
	for _, r := range m.runners {
		rs = append(rs, r)
	}
	m.mu.Unlock()
	for _, r := range rs {
		r.shutdown(false)
	}
	m.wg.Wait()
	if len(rs) > 0 {
		// Their leases are released: the other replicas take the
		// Sessions over now rather than at their next sweep.
		m.cfg.Notifier.Notify(releasedStream)
	}
}

// awaitReplies waits, up to DrainTimeout, for the runners rs to end (a
// draining runner ends once its reply in progress does), saying each
// second which Sessions it still waits for.
func (m *Manager) awaitReplies(rs []*runner) {
	deadline := time.NewTimer(m.cfg.DrainTimeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	start := time.Now()
	for _, r := range rs {
	wait:
		for {
			select {
			case <-r.done:
				break wait
			case <-deadline.C:
				m.log.Warn("stopping: replies still in progress are handed over now", "sessions", running(rs), "grace", m.cfg.DrainTimeout)
				return
			case <-tick.C:
				m.log.Info("stopping: waiting for replies in progress", "sessions", running(rs),
					"waited", time.Since(start).Round(time.Second), "grace", m.cfg.DrainTimeout)
			}
		}
	}
}

// running lists the Sessions of the runners in rs that have not ended.
func running(rs []*runner) []string {
	var ids []string
	for _, r := range rs {
		select {
		case <-r.done:
		default:
			ids = append(ids, r.id)
		}
	}
	return ids
}

// releasedStream is the notification a replica sends when it let its
// Sessions go (a graceful shutdown), so that the others sweep at once.
const releasedStream = "runners:released"

// Sweep, every interval until ctx ends, wakes the Sessions that have a
// runtime or queued inputs but whose lease no live replica holds: a holder
// that died (or stopped renewing) loses its Sessions to this replica
// within a lease period and a sweep, and one that shut down gracefully
// (and said so) at once.
func (m *Manager) Sweep(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	released, stop := m.cfg.Notifier.Subscribe(releasedStream)
	defer stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-released:
			if err := m.sweepOnce(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("sweep sessions", "err", err)
			}
		case <-t.C:
			if err := m.sweepOnce(ctx); err != nil && ctx.Err() == nil {
				m.log.Warn("sweep sessions", "err", err)
			}
		}
	}
}

func (m *Manager) sweepOnce(ctx context.Context) error {
	recs, err := m.st.ListSessions(ctx, store.SessionFilter{States: []string{platform.StateCreating, platform.StateReady,
		platform.StateBusy, platform.StateInterrupting, platform.StateRecoveryRequired}})
	if err != nil {
		return fmt.Errorf("list sessions: %w", err)
	}
	now := time.Now()
	for _, rec := range recs {
		if m.get(rec.ID) != nil {
			continue
		}
		lease, err := m.st.GetLease(ctx, rec.ID)
		if err != nil {
			return fmt.Errorf("session lease: %w", err)
		}
		if lease.Holder != "" && lease.ExpiresAt.After(now) {
			continue // held by a live replica
		}
		if rec.SandboxID == "" {
			pending, err := m.st.ListInputs(ctx, rec.ID, store.InputAccepted, store.InputDelivered)
			if err != nil {
				return fmt.Errorf("list inputs: %w", err)
			}
			if len(pending) == 0 {
				continue // nothing to run: the next input wakes it
			}
		}
		m.log.Info("taking over a session no live replica holds", "session_id", rec.ID, "last_holder", lease.Holder)
		m.Wake(rec.ID)
	}
	return nil
}

// Holder returns the replica holding the Session's runtime lease now
// ("" when none holds a live one).
func (m *Manager) Holder(ctx context.Context, sessionID string) (string, error) {
	lease, err := m.st.GetLease(ctx, sessionID)
	if err != nil {
		return "", err
	}
	if lease.Holder == "" || !lease.ExpiresAt.After(time.Now()) {
		return "", nil
	}
	return lease.Holder, nil
}

// HolderName is this replica's name in leases.
func (m *Manager) HolderName() string { return m.cfg.Holder }
