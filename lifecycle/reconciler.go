package lifecycle

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Reconcile runs one reconciler per enabled backend until ctx ends, each
// every interval: it deletes expired and idle sandboxes, marks records whose
// box is gone as Failed, deletes Failed and half-created boxes, and
// removes orphans (boxes the backend has that the store does not know),
// and refills warm pools, also at once when a claim took a pooled box.
// One slow or dead backend never delays another.
func (s *Service) Reconcile(ctx context.Context, interval time.Duration) {
	s.interval.Store(int64(interval))
	var wg sync.WaitGroup
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
			s.reap(pass, rec.ID, "ttl_expiry")
		case rec.IdleTimeout > 0 && now.Sub(rec.LastActiveAt) >= rec.IdleTimeout && rec.State == sandbox.StateRunning:
			if s.busy(pass, rec) {
				s.Touch(pass, rec) // a running command is activity
				continue
			}
			s.reap(pass, rec.ID, "idle_timeout")
		case rec.State == sandbox.StateFailed || rec.State == sandbox.StateStopping:
			s.reap(pass, rec.ID, "cleanup_"+string(rec.State))
		case rec.State == sandbox.StatePending && now.Sub(rec.CreatedAt) > s.cfg.CreateTimeout+time.Minute:
			s.reap(pass, rec.ID, "provision_timeout")
		case rec.State == sandbox.StateRunning || rec.State == sandbox.StatePaused:
			if err := s.ensureAttached(pass, rec); err != nil && !errors.Is(err, sandbox.ErrNotFound) {
				s.log.Warn("reconcile: re-attach", "backend", name, "sandbox_id", rec.ID, "err", err)
				continue
			}
			info, err := p.Inspect(pass, rec.ID)
			if errors.Is(err, sandbox.ErrNotFound) || (err == nil && info.State == sandbox.StateFailed) {
				reason := "box_lost"
				if err == nil {
					reason = "runtime_error: " + info.Reason
				}
				s.markFailed(pass, rec.ID, reason)
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
// already Terminated or Failed; other fields keep their stored values.
func (s *Service) markFailed(ctx context.Context, id, reason string) {
	unlock := s.lock(id)
	defer unlock()
	_, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		if cur.State.Terminal() {
			return errUnchanged
		}
		cur.State, cur.Reason = sandbox.StateFailed, reason
		return nil
	})
	if err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		s.log.Warn("reconcile: mark failed", "sandbox_id", id, "reason", reason, "err", err)
	}
}

// reconcileTTL is how long a pass's lease lasts: three intervals, so a
// replica that stops passing loses the instance to another within that.
func (s *Service) reconcileTTL() time.Duration {
	if iv := time.Duration(s.interval.Load()); iv > 0 {
		return 3 * iv
	}
	return 15 * time.Second
}
