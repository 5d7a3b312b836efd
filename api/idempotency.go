package api

import (
	"context"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/api/idempotency"
)

// HeaderIdempotencyKey makes create and renew safe to retry.
const HeaderIdempotencyKey = idempotency.Header

// idempotent runs do once per Idempotency-Key (scoped by scope): a repeat
// with the same body gets the first answer again; a different body gets
// 422. Without the header, do simply runs. Errors are not remembered, so a
// failed request can be retried with the same key (idempotency.Serve).
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, do func() (int, any, error)) {
	idempotency.Serve(w, r, s.cfg.Store, s.log, scope, body, 0, do)
}

// ForgetIdempotency removes remembered answers older than a day, every
// interval, until ctx ends.
func (s *Server) ForgetIdempotency(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.cfg.Store.DeleteIdempotencyBefore(ctx, time.Now().Add(-idempotency.TTL)); err != nil && ctx.Err() == nil {
			s.log.Warn("forget idempotency keys", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
