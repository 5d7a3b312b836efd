package platformapi

import (
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/sandbox"
)

// forwardToHolder serves a request that only the holder of a Session's
// runtime can carry out (an interrupt, an answer) by forwarding it there
// when another live replica holds it, and reports whether it did.
func (h *Handler) forwardToHolder(w http.ResponseWriter, r *http.Request, sessionID string) bool {
	if r.Header.Get(httpx.HeaderForwarded) != "" {
		return false
	}
	lease, err := h.cfg.Store.GetLease(r.Context(), sessionID)
	if err != nil || lease.Holder == "" || lease.Holder == h.cfg.Holder || !lease.ExpiresAt.After(time.Now()) {
		return false
	}
	target, err := url.Parse(lease.Holder)
	if err != nil || target.Host == "" {
		return false
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			httpx.SignForwarded(pr.Out, h.cfg.ForwardKey, h.cfg.Holder)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			h.log.Warn("forward to the session's holder", "session_id", sessionID, "holder", lease.Holder, "err", err)
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "session %s is held by %s, which did not answer", sessionID, lease.Holder))
		},
	}
	rp.ServeHTTP(w, r)
	return true
}
