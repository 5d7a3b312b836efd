package lifecycle

import (
	"context"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// ensureAttached makes the record's provider know its box before it is
// reached: a restarted server, or a replica sharing a Docker engine with
// the one that made the box, re-attaches from the state blob stored with
// the record (sandbox.Attacher), once per box per process. Providers
// without Attach, and records without a blob, need nothing.
func (s *Service) ensureAttached(ctx context.Context, rec *store.Sandbox) error {
	if _, ok := s.attached.Load(rec.ID); ok {
		return nil
	}
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is not enabled", rec.Backend)
	}
	a, ok := p.(sandbox.Attacher)
	if !ok || len(rec.ProviderState) == 0 {
		s.attached.Store(rec.ID, true)
		return nil
	}
	info, err := a.Attach(ctx, rec.ID, rec.ProviderState)
	if err != nil {
		return fmt.Errorf("re-attach sandbox %s: %w", rec.ID, err)
	}
	if info.AccessToken != "" {
		s.tokens.Store(rec.ID, info.AccessToken)
	}
	s.attached.Store(rec.ID, true)
	return nil
}
