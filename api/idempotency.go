package api

import (
	"context"
	"net/http"
	"time"

	"github.com/astrabox/astrabox/api/idempotency"
	"github.com/astrabox/astrabox/identity"
)

// HeaderIdempotencyKey makes create and renew safe to retry.
const HeaderIdempotencyKey = idempotency.Header

// idempotent runs do once per Idempotency-Key (scoped by scope): a repeat
// with the same body gets the first answer again; a different body gets
// 422. Without the header, do simply runs. Errors are not remembered, so a
// failed request can be retried with the same key (idempotency.Keeper).
func (s *Server) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, do func() (int, any, error)) {
	s.idem.Serve(w, r, scope, body, 0, do)
}

// callerID is the user id of r's caller ("" for none), which scopes its
// Idempotency-Keys: one user's key never replays another's answer.
func callerID(r *http.Request) string {
	if p := identity.PrincipalFrom(r.Context()); p != nil {
		return p.UserID
	}
	return ""
}

// ForgetIdempotency removes remembered answers older than a day and
// expired browser sessions, every interval, until ctx ends.
func (s *Server) ForgetIdempotency(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := s.cfg.Store.DeleteIdempotencyBefore(ctx, time.Now().Add(-idempotency.TTL)); err != nil && ctx.Err() == nil {
			s.log.Warn("forget idempotency keys", "err", err)
		}
		if err := s.cfg.Store.DeleteWebSessionsBefore(ctx, time.Now(), ""); err != nil && ctx.Err() == nil {
			s.log.Warn("forget expired browser sessions", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
