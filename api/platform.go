package api

import (
	"github.com/astrabox/astrabox/api/platformapi"
	"github.com/astrabox/astrabox/platform/modelapi"
)

// ModelCheck (addition) answers a model endpoint check (modelapi.Check),
// as POST /api/v1/runtime-profiles/{name}/test-model does.
type ModelCheck = modelapi.Result

// platformRoutes registers the agent platform's /api/v1 routes (package
// platformapi), each behind the server's authentication (handle).
func (s *Server) platformRoutes() {
	h := platformapi.New(platformapi.Config{
		Catalog:      s.cat,
		Sessions:     s.cfg.Sessions,
		Backends:     s.svc,
		Idempotency:  s.idem,
		MaxBodyBytes: s.cfg.MaxBodyBytes,
		Logger:       s.log,
		// An open event stream re-authenticates its request about every
		// second and ends when its caller's access does.
		Reauthorize: s.authenticate,
	})
	s.handleRoutes(h.Routes())
}
