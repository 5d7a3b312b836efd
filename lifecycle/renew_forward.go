package lifecycle

import (
	"context"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// forwardRenew hands a renewal of rec to its backend when the backend
// keeps an expiry of its own (sandbox.Renewer), so that the backend does
// not expire the box before the record says. Renew calls it once the
// renewal passed its own checks and before it records the new expiry: a
// backend's refusal leaves the record as it was. Backends without an
// expiry of their own need nothing.
func (s *Service) forwardRenew(ctx context.Context, rec *store.Sandbox, at time.Time) error {
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return nil // a disabled backend's record: nothing to forward to
	}
	r, ok := p.(sandbox.Renewer)
	if !ok {
		return nil
	}
	if err := s.ensureAttached(ctx, rec); err != nil {
		return err
	}
	if err := r.Renew(ctx, rec.ID, at); err != nil {
		return fmt.Errorf("renew sandbox %s on backend %s: %w", rec.ID, rec.Backend, err)
	}
	return nil
}
