package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/idempotency"
	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// Health, readiness and metrics. /healthz (and /health) is open to
// anyone and says only that the process answers. /readyz is open too, for
// load balancers, but an unauthenticated request gets just its status
// (200 ready, 503 not) and {"ready": bool}: which backends, instances and
// stores there are, and why one is unhealthy, only go to requests with
// the API key. /metrics (counts by backend and state) is open unless
// Config.MetricsRequireKey is set.

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	w.Header().Set(idempotency.HeaderBoot, s.boot) // which start of this replica answers
	httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// ready reports the store and every enabled backend, each probed with a
// deadline; it is ready only when all are. The detail goes to
// authenticated requests only (see above).
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	out := map[string]any{}
	ok := true
	if err := s.cfg.Store.Ping(ctx); err != nil {
		ok = false
		out["store"] = map[string]string{"status": "unhealthy", "reason": err.Error()}
	} else {
		out["store"] = map[string]string{"status": "healthy"}
	}
	// Probed at once: one slow backend does not delay the others' answer.
	backends := map[string]sandbox.Health{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, p := range s.svc.Backends() {
		wg.Go(func() {
			h := p.Health(ctx)
			mu.Lock()
			defer mu.Unlock()
			backends[name] = h
			if h.Status != sandbox.Healthy {
				ok = false
			}
		})
	}
	wg.Wait()
	out["backends"] = backends
	// Which backend instance each backend drives, and whether this replica
	// is the one reconciling it now.
	instances := map[string]map[string]any{}
	for name := range s.svc.Backends() {
		instances[name] = map[string]any{"instance": s.svc.Instance(ctx, name), "reconciling": s.svc.Reconciling(name)}
	}
	out["instances"] = instances
	status := http.StatusOK
	if !ok {
		status = http.StatusServiceUnavailable
	}
	if s.draining.Load() {
		status, ok = http.StatusServiceUnavailable, false
		out["draining"] = true
	}
	out["ready"] = ok
	if !s.mayReadHealth(r) {
		out = map[string]any{"ready": ok}
	}
	httpx.WriteJSON(w, status, out)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.MetricsRequireKey && !s.authorized(r) {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUnauthorized, "missing or invalid %s header", HeaderAPIKey))
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	if err := s.svc.WriteMetrics(r.Context(), w); err != nil {
		s.log.Warn("metrics", "err", err)
	}
	writeCounter(w, "astrabox_api_errors_total", "API answers with a 4xx or 5xx status.", apiErrors.Load())
	if s.cat != nil && s.cfg.Sessions != nil {
		if err := s.writeSessionMetrics(r.Context(), w); err != nil {
			s.log.Warn("metrics", "err", err)
		}
	}
	metrics.Write(w)
}

// sessionStates are the states astrabox_sessions reports, each even at 0.
var sessionStates = []string{platform.StateCreating, platform.StateReady, platform.StateBusy, platform.StateInterrupting,
	platform.StateRecoveryRequired, platform.StateTerminated, platform.StateDeleted}

// writeSessionMetrics writes the agent platform's Sessions by state, counted
// by the store.
func (s *Server) writeSessionMetrics(ctx context.Context, w io.Writer) error {
	counts, err := s.cfg.Store.CountSessions(ctx)
	if err != nil {
		return fmt.Errorf("session metrics: %w", err)
	}
	fmt.Fprintf(w, "# HELP astrabox_sessions Agent platform Sessions by state.\n# TYPE astrabox_sessions gauge\n")
	for _, st := range sessionStates {
		fmt.Fprintf(w, "astrabox_sessions{state=%q} %d\n", st, counts[st])
	}
	return nil
}

// mayReadHealth reports whether r may see /readyz's detail: with the
// bootstrap key (compared in memory), or a key accepted within a second;
// the answer never waits long on the store whose health it reports.
func (s *Server) mayReadHealth(r *http.Request) bool {
	if s.cfg.Insecure || s.auth.IsBootstrapKey(r.Header.Get(HeaderAPIKey)) {
		return true
	}
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	_, err := s.authenticateAs(r.WithContext(ctx), false)
	return err == nil
}
