package api

import (
	"net/http"
	"net/http/httputil"
	"net/url"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// HeaderForwarded marks a request one replica forwarded to another; a
// forwarded request is never forwarded again.
const HeaderForwarded = httpx.HeaderForwarded

// forwardElsewhere serves a request about a box on a backend instance this
// replica does not serve (another host's native backend) by forwarding it
// to the replica that reconciles that instance, and reports whether it
// answered the request (forwarded, or an error naming the owner). Boxes
// of instances this replica serves are left to the caller.
func (s *Server) forwardElsewhere(w http.ResponseWriter, r *http.Request, rec *store.Sandbox) bool {
	ctx := r.Context()
	if rec.Instance == "" || rec.Instance == s.svc.Instance(ctx, rec.Backend) {
		return false
	}
	holder, err := s.svc.ReconcileHolder(ctx, rec.Instance)
	if err != nil {
		httpx.WriteError(w, err)
		return true
	}
	if holder == "" || holder == s.cfg.Holder || r.Header.Get(HeaderForwarded) != "" {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUnavailable,
			"sandbox %s lives on backend instance %s, which this server does not serve, and no live replica serves it now", rec.ID, rec.Instance))
		return true
	}
	target, err := url.Parse(holder)
	if err != nil || target.Host == "" {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUnavailable, "sandbox %s lives on backend instance %s, served by %q, which is not a URL", rec.ID, rec.Instance, holder))
		return true
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			// An endpoint host's request keeps its Host: the replica routes
			// on it (the same EndpointDomain is every replica's).
			pr.Out.Host = target.Host
			if _, onEndpoint := s.endpointLabel(pr.In.Host); onEndpoint {
				pr.Out.Host = pr.In.Host
			}
			httpx.SignForwarded(pr.Out, s.cfg.SigningKey, s.cfg.Holder)
		},
		FlushInterval: -1, // SSE and streamed output pass unbuffered
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("forward to the replica serving a box", "sandbox_id", rec.ID, "instance", rec.Instance, "holder", holder, "err", err)
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "sandbox %s is served by %s, which did not answer", rec.ID, holder))
		},
	}
	rp.ServeHTTP(w, r)
	return true
}

// boxOp runs op for a box-changing request, after forwarding it if the
// box lives on another replica's instance.
func (s *Server) boxOp(w http.ResponseWriter, r *http.Request, op func() error, status int) {
	rec, err := s.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if s.forwardElsewhere(w, r, rec) {
		return
	}
	if err := op(); err != nil {
		httpx.WriteError(w, err)
		return
	}
	w.WriteHeader(status)
}
