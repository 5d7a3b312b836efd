package lifecycle

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"

	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Reconcile runs one reconciler per enabled backend until ctx ends, each
// every interval: it deletes expired and idle sandboxes, marks records whose
// box died (or is gone) as Failed with the reason the backend gives and
// releases what the backend still holds of the box, keeping the record
// until it is deleted or expires (see keptFailed); it deletes other Failed
// records (a failed delete or create) and half-created boxes, removes
// orphans (boxes the backend has that the store does not know), and
// refills warm pools, also at once when a claim took a pooled box. One
// slow or dead backend never delays another.
func (s *Service) Reconcile(ctx context.Context, interval time.Duration) {
	s.interval.Store(int64(interval))
	var wg sync.WaitGroup
	wg.Go(func() { s.forgetEventsEvery(ctx, min(s.cfg.EventRetention/4, 5*time.Minute)) })
	for name, p := range s.cfg.Backends {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				s.ReconcileBackend(ctx, name, p)
				if !s.waitForPass(ctx, name, t.C) {
					return
				}
			}
		}()
	}
	wg.Wait()
}

// ForgetEvents deletes the state events of sandboxes deleted more than
// Config.EventRetention ago, and returns how many sandboxes' events went.
func (s *Service) ForgetEvents(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := s.cfg.Store.DeleteSandboxStreamsBefore(ctx, s.now().Add(-s.cfg.EventRetention), 500)
		total += n
		if err != nil || n < 500 {
			return total, err
		}
	}
}

// forgetEventsEvery runs ForgetEvents every interval until ctx ends.
func (s *Service) forgetEventsEvery(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(max(interval, time.Second))
	defer t.Stop()
	for {
		if n, err := s.ForgetEvents(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("forget deleted sandboxes' events", "err", err)
		} else if n > 0 {
			s.log.Debug("deleted sandboxes' events forgotten", "sandboxes", n, "retention", s.cfg.EventRetention)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// refillDelay is how long a refill waits after a claim.
const refillDelay = 250 * time.Millisecond

// waitForPass refills backend's pools whenever a claim asks, until the
// next full pass is due (true) or ctx ends (false).
func (s *Service) waitForPass(ctx context.Context, backend string, tick <-chan time.Time) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick:
			return true
		case <-s.kicks[backend]:
			if held, _ := s.holding.Load(backend); held != true {
				continue // the instance's reconciler refills its pools
			}
			// A claimed box is usually used at once: let its first commands
			// run before new boxes compete for the CPU (claims in a burst
			// share one refill).
			select {
			case <-ctx.Done():
				return false
			case <-time.After(refillDelay):
			}
			pass, cancel := context.WithTimeout(ctx, 2*time.Minute)
			s.refillPools(pass, backend)
			cancel()
		}
	}
}

// ReconcileBackend makes one pass over backend name: over the records of
// the backend instance it drives only, and only while this replica holds
// the instance's reconciliation lease (renewed by every pass, lasting
// leaseTTL), so replicas sharing an instance (a Docker engine) reconcile
// it one at a time and never reap each other's boxes.
func (s *Service) ReconcileBackend(ctx context.Context, name string, p sandbox.Provider) {
	s.reconcileBackend(ctx, name, p, s.reconcileTTL())
}

func (s *Service) reconcileBackend(ctx context.Context, name string, p sandbox.Provider, leaseTTL time.Duration) {
	pass, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	instance := s.Instance(pass, name)
	held := s.holdReconcile(pass, instance, leaseTTL)
	s.holding.Store(name, held)
	if !held {
		return
	}
	metrics.ReconcilePasses.Inc(name)
	defer func(start time.Time) { metrics.ReconcileDuration.Observe(time.Since(start), name) }(time.Now())
	now := s.now()
	recs, _, err := s.cfg.Store.ListSandboxes(pass, store.ListFilter{Backend: name, AllPools: true})
	if err != nil {
		s.log.Warn("reconcile: list records", "backend", name, "err", err)
		return
	}
	known := map[string]bool{}
	for _, rec := range recs {
		known[rec.ID] = true
		if rec.Instance != instance && (rec.Instance != "" || !s.adoptLegacy(pass, rec, instance)) {
			continue // another instance's box: its own replicas reconcile it
		}
		switch {
		case rec.ExpiresAt != nil && !now.Before(*rec.ExpiresAt):
			metrics.ReconcileActions.Inc(name, "ttl_expiry")
			s.reap(pass, rec.ID, "ttl_expiry")
		case rec.IdleTimeout > 0 && now.Sub(rec.LastActiveAt) >= rec.IdleTimeout && rec.State == sandbox.StateRunning:
			if s.busy(pass, rec) {
				s.Touch(pass, rec) // a running command is activity
				continue
			}
			metrics.ReconcileActions.Inc(name, "idle_timeout")
			s.reap(pass, rec.ID, "idle_timeout")
		case rec.State == sandbox.StateFailed && keptFailed(rec):
			metrics.ReconcileActions.Inc(name, "release_failed")
			s.release(pass, p, rec.ID)
		case rec.State == sandbox.StateFailed || rec.State == sandbox.StateStopping:
			metrics.ReconcileActions.Inc(name, "cleanup_"+string(rec.State))
			s.reap(pass, rec.ID, "cleanup_"+string(rec.State))
		case rec.State == sandbox.StatePending && now.Sub(rec.CreatedAt) > s.cfg.CreateTimeout+time.Minute:
			metrics.ReconcileActions.Inc(name, "provision_timeout")
			s.reap(pass, rec.ID, "provision_timeout")
		case rec.State == sandbox.StateRunning || rec.State == sandbox.StatePaused:
			if err := s.ensureAttached(pass, rec); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				s.log.Warn("reconcile: re-attach", "backend", name, "sandbox_id", rec.ID, "err", err)
				continue
			}
			info, err := p.Inspect(pass, rec.ID)
			if errors.Is(err, sandbox.ErrNotFound) || (err == nil && info.State == sandbox.StateFailed) {
				reason := sandbox.ReasonLost
				if err == nil {
					reason = diedReason(info.Reason)
				}
				if s.markFailed(pass, rec.ID, reason) {
					metrics.ReconcileActions.Inc(name, "died")
					s.log.Warn("reconcile: sandbox died", "backend", name, "sandbox_id", rec.ID, "reason", reason)
					if rec.Pool == "" {
						s.release(pass, p, rec.ID)
					}
				}
			}
		}
	}
	boxes, err := p.List(pass)
	if err != nil {
		s.log.Warn("reconcile: list boxes", "backend", name, "err", err)
		return
	}
	for _, b := range boxes {
		if known[b.ID] {
			continue
		}
		// A box may be being created right now: its record exists then.
		if _, err := s.cfg.Store.GetSandbox(pass, b.ID); err == nil {
			continue
		}
		s.log.Info("reconcile: removing orphan box", "backend", name, "sandbox_id", b.ID)
		metrics.ReconcileActions.Inc(name, "orphan_removed")
		if err := p.Delete(pass, b.ID); err != nil {
			s.log.Warn("reconcile: remove orphan", "backend", name, "sandbox_id", b.ID, "err", err)
		}
	}
	s.refillPools(pass, name)
}

// busy reports whether the sandbox's execd is running a command (or cannot
// be asked: an unreachable box is left to the failure checks).
func (s *Service) busy(ctx context.Context, rec *store.Sandbox) bool {
	token, err := s.AccessToken(ctx, rec)
	if err != nil {
		return true
	}
	c := execdclient.New("http://execd", execdclient.WithToken(token), execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return s.Dial(ctx, rec)
	}))
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := c.RunningCommands(cctx)
	return err != nil || n > 0
}

func (s *Service) reap(ctx context.Context, id, reason string) {
	if err := s.Delete(ctx, id, reason); err != nil {
		s.log.Warn("reconcile: delete sandbox", "sandbox_id", id, "reason", reason, "err", err)
	}
}

// markFailed records sandbox id as Failed for reason, unless it is gone or
// already Terminated or Failed; other fields keep their stored values. It
// reports whether it moved the record.
func (s *Service) markFailed(ctx context.Context, id, reason string) bool {
	unlock := s.lock(id)
	defer unlock()
	moved := false
	_, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		if cur.State.Terminal() {
			return errUnchanged
		}
		cur.State, cur.Reason = sandbox.StateFailed, reason
		moved = true
		return nil
	})
	if err != nil {
		if sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
			s.log.Warn("reconcile: mark failed", "sandbox_id", id, "reason", reason, "err", err)
		}
		return false
	}
	return moved
}

// reasonRuntimeError prefixes the reason of a box the backend reports
// Failed without one of the codes of a box that died (sandbox.DiedReason).
const reasonRuntimeError = "runtime_error"

// diedReason is the reason a record keeps for a box its backend reports
// Failed with reason: the backend's own when it names how the box died
// (oom_killed, box_exited, box_lost; or runtime_error, as a remote server
// reports it), else runtime_error and the backend's message.
func diedReason(reason string) string {
	if namesDeath(reason) {
		return reason
	}
	return reasonRuntimeError + ": " + reason
}

// namesDeath reports whether reason says how a box died: one of the codes
// of sandbox.DiedReason, or runtime_error.
func namesDeath(reason string) bool {
	code, _, _ := strings.Cut(reason, ": ")
	return code == reasonRuntimeError || sandbox.DiedReason(code)
}

// keptFailed reports whether Failed record rec is one the reconciler keeps:
// a user's box (not a warm pool's) that died while it ran, whose record
// says why until the user deletes it (or it expires). Other Failed records
// (a delete or a create that failed, a pool box) are deleted by the
// reconciler.
func keptFailed(rec *store.Sandbox) bool {
	return rec.Pool == "" && namesDeath(rec.Reason)
}

// release frees what backend p still holds of the box of kept Failed
// record id (its cgroups, uid range, container, directories; its processes
// are gone) and leaves the record as it is. It does so once per box per
// process: a release that fails is tried again by the next pass, and one
// that finds the record changed (deleted meanwhile) does nothing.
func (s *Service) release(ctx context.Context, p sandbox.Provider, id string) {
	if _, done := s.released.Load(id); done {
		return
	}
	unlock := s.lock(id)
	defer unlock()
	rec, err := s.cfg.Store.GetSandbox(ctx, id)
	if err != nil || rec.State != sandbox.StateFailed || !keptFailed(rec) {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, deleteTimeout)
	defer cancel()
	if err := p.Delete(dctx, id); err != nil {
		s.log.Warn("reconcile: release the box of a failed sandbox", "sandbox_id", id, "err", err)
		return
	}
	s.released.Store(id, true)
	s.tokens.Delete(id)
	if spec, err := recordSpec(rec); err == nil && spec.CredentialProxy {
		s.forgetCredentialVault(ctx, id)
	}
	s.log.Info("reconcile: released the box of a failed sandbox; its record stays until it is deleted", "sandbox_id", id, "reason", rec.Reason)
}

// reconcileTTL is how long a pass's lease lasts: three intervals, so a
// replica that stops passing loses the instance to another within that.
func (s *Service) reconcileTTL() time.Duration {
	if iv := time.Duration(s.interval.Load()); iv > 0 {
		return 3 * iv
	}
	return 15 * time.Second
}
