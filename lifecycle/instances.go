package lifecycle

import (
	"context"
	"errors"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Instance returns the name of the backend instance an enabled backend
// drives (sandbox.Instancer), cached after the first success; "" when the
// provider names none or cannot say yet.
func (s *Service) Instance(ctx context.Context, backend string) string {
	if v, ok := s.instances.Load(backend); ok {
		return v.(string)
	}
	p, ok := s.cfg.Backends[backend]
	if !ok {
		return ""
	}
	in, ok := p.(sandbox.Instancer)
	if !ok {
		return ""
	}
	name, err := in.Instance(ctx)
	if err != nil {
		s.log.Warn("backend instance cannot be named yet", "backend", backend, "err", err)
		return ""
	}
	s.instances.Store(backend, name)
	return name
}

// unit names what a warm pool belongs to: a backend instance (pooled
// boxes of another host's native backend are never claimed here).
func (s *Service) unit(ctx context.Context, backend string) string {
	if in := s.Instance(ctx, backend); in != "" {
		return backend + "@" + in
	}
	return backend
}

// reconcileLease is the lease (a store stream's) that lets one replica at
// a time reconcile a backend instance.
func reconcileLease(instance string) string { return "reconcile:" + instance }

// holdReconcile takes or renews this replica's lease on the instance's
// reconciliation for ttl; false when another live replica holds it.
func (s *Service) holdReconcile(ctx context.Context, instance string, ttl time.Duration) bool {
	if instance == "" {
		return true // an unnamed instance is this server's alone
	}
	_, err := s.cfg.Store.AcquireLease(ctx, reconcileLease(instance), s.cfg.Holder, ttl)
	if errors.Is(err, store.ErrConflict) {
		return false
	}
	if err != nil {
		s.log.Warn("reconcile: lease", "instance", instance, "err", err)
		return false
	}
	return true
}

// ReconcileHolder returns the replica holding the reconciliation lease of
// a backend instance ("" when none holds a live one).
func (s *Service) ReconcileHolder(ctx context.Context, instance string) (string, error) {
	l, err := s.cfg.Store.GetLease(ctx, reconcileLease(instance))
	if err != nil {
		return "", err
	}
	if l.Holder == "" || !l.ExpiresAt.After(s.now()) {
		return "", nil
	}
	return l.Holder, nil
}

// adoptLegacy gives a record from before instances were kept the local
// instance: such records were made by a single server, this one.
func (s *Service) adoptLegacy(ctx context.Context, rec *store.Sandbox, instance string) bool {
	unlock := s.lock(rec.ID)
	defer unlock()
	cur, err := s.cfg.Store.GetSandbox(ctx, rec.ID)
	if err != nil || cur.Instance != "" {
		return err == nil && cur.Instance == instance
	}
	cur.Instance = instance
	if err := s.cfg.Store.UpdateSandbox(ctx, cur); err != nil {
		return false
	}
	*rec = *cur
	return true
}

// Reconciling reports whether this replica's last pass over backend held
// its instance's reconciliation lease.
func (s *Service) Reconciling(backend string) bool {
	held, _ := s.holding.Load(backend)
	return held == true
}
