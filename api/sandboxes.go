package api

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// minTimeout is the specification's minimum sandbox timeout.
const minTimeout = 60

// toWire converts a record to the API's Sandbox.
func toWire(rec *store.Sandbox) Sandbox {
	sb := Sandbox{
		ID:          rec.ID,
		Status:      SandboxStatus{State: string(rec.State), LastTransitionAt: rec.UpdatedAt},
		Metadata:    rec.Metadata,
		Entrypoint:  rec.Entrypoint,
		ExpiresAt:   rec.ExpiresAt,
		CreatedAt:   rec.CreatedAt,
		UpdatedAt:   rec.UpdatedAt,
		Backend:     rec.Backend,
		Profile:     rec.Profile,
		IdleTimeout: int64(rec.IdleTimeout / time.Second),
	}
	if sb.Entrypoint == nil {
		sb.Entrypoint = []string{}
	}
	if rec.Image != "" {
		sb.Image = &ImageSpec{URI: rec.Image}
	}
	if r, msg, ok := strings.Cut(rec.Reason, ": "); ok {
		sb.Status.Reason, sb.Status.Message = r, msg
	} else {
		sb.Status.Reason = rec.Reason
	}
	return sb
}

// toCreateRequest validates the wire request and maps it for the service.
// Timeouts beyond lim's are refused here, before seconds are turned into a
// time.Duration (which a huge count would overflow); the service checks
// the rest of lim on the merged spec.
func toCreateRequest(req CreateSandboxRequest, lim lifecycle.Limits) (lifecycle.CreateRequest, error) {
	var out lifecycle.CreateRequest
	out.SnapshotID = req.SnapshotID
	if req.Platform != nil && (req.Platform.OS != "linux" || req.Platform.Arch != "amd64") {
		return out, sandbox.Errorf(sandbox.CodeCapability, "platform %s/%s is not available (available: linux/amd64)", req.Platform.OS, req.Platform.Arch)
	}
	if req.Image != nil {
		out.Image = strings.TrimSpace(req.Image.URI)
		if out.Image == "" {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "image.uri must not be empty")
		}
	}
	vols, err := toVolumes(req.Volumes)
	if err != nil {
		return out, err
	}
	out.Volumes = vols
	maxSeconds := int64(lim.Timeout() / time.Second)
	if req.Timeout != nil {
		if *req.Timeout < minTimeout {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "timeout must be at least %d seconds, got %d", minTimeout, *req.Timeout)
		}
		if *req.Timeout > maxSeconds {
			return out, sandbox.Errorf(sandbox.CodeLimitOutOfRange, "timeout %ds exceeds the server's maximum %ds", *req.Timeout, maxSeconds)
		}
		d := time.Duration(*req.Timeout) * time.Second
		out.Timeout = &d
	}
	// An omitted or null timeout takes the profile's, which for the default
	// profile is none: no expiry, as OpenSandbox defines it.
	if req.IdleTimeout != nil {
		if *req.IdleTimeout < 0 {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "idleTimeout must not be negative")
		}
		if *req.IdleTimeout > maxSeconds {
			return out, sandbox.Errorf(sandbox.CodeLimitOutOfRange, "idleTimeout %ds exceeds the server's maximum %ds", *req.IdleTimeout, maxSeconds)
		}
		d := time.Duration(*req.IdleTimeout) * time.Second
		out.IdleTimeout = &d
	}
	res, caps, err := parseResources(req.ResourceLimits)
	if err != nil {
		return out, err
	}
	out.Resources, out.Capabilities = res, caps
	for _, a := range req.Entrypoint {
		if strings.IndexByte(a, 0) >= 0 {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "entrypoint contains a NUL byte")
		}
	}
	out.Entrypoint, out.Env, out.Metadata = req.Entrypoint, req.Env, req.Metadata
	if err := lifecycle.ValidateMetadata(req.Metadata); err != nil {
		return out, err
	}
	if req.NetworkPolicy != nil {
		np, err := toNetworkPolicy(*req.NetworkPolicy)
		if err != nil {
			return out, err
		}
		out.Network = &np
	}
	if cp := req.CredentialProxy; cp != nil && cp.Enabled {
		if req.NetworkPolicy == nil {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "credentialProxy.enabled needs a networkPolicy: the Credential Proxy is part of the egress proxy")
		}
		if _, ok := req.Extensions["network"]; ok {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "extension network none contradicts credentialProxy.enabled, which needs the egress proxy")
		}
		np, err := credentialProxyPolicy(*req.NetworkPolicy)
		if err != nil {
			return out, err
		}
		out.Network, out.CredentialProxy = &np, true
	}
	// Extension "network": "none" asks for no network at all, where
	// OpenSandbox's closest, a deny-all policy, is a box whose egress proxy
	// refuses everything and can be widened at run time (what a remote
	// backend in front of AstraBox sends for network none).
	if v, ok := req.Extensions["network"]; ok {
		if v != string(sandbox.NetworkNone) {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "extension network must be none, got %q", v)
		}
		if n := out.Network; n != nil && n.Mode != sandbox.NetworkNone && (n.DefaultAction != "deny" || len(n.Rules) > 0) {
			return out, sandbox.Errorf(sandbox.CodeInvalidRequest, "extension network none contradicts the networkPolicy, which lets traffic out")
		}
		out.Network = &sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}
	}
	out.Profile = req.Extensions["profile"]
	out.Backend = req.Backend
	if b := req.Extensions["backend"]; b != "" && out.Backend == "" {
		out.Backend = b
	}
	return out, nil
}

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	// A key is the caller's own: another user's same key and body creates
	// its own box rather than replaying the first caller's.
	s.idempotent(w, r, "create:"+callerID(r), body, func() (int, any, error) {
		var req CreateSandboxRequest
		if err := httpx.DecodeBytes(body, &req); err != nil {
			return 0, nil, err
		}
		creq, err := toCreateRequest(req, s.svc.Limits())
		if err != nil {
			return 0, nil, err
		}
		// The box is the caller's. It starts from a snapshot, and mounts
		// named volumes, of the caller's only, unless the caller is an
		// administrator (lifecycle answers NOT_FOUND for another's).
		creq.Owner = callerOf(r.Context())
		rec, err := s.svc.Create(r.Context(), creq)
		if err != nil {
			return 0, nil, err
		}
		w.Header().Set("Location", "/v1/sandboxes/"+rec.ID)
		return http.StatusAccepted, toWire(rec), nil
	})
}

// auditAs records action on target in the audit log as done by r's
// caller (the Shipyard facade's sandbox deletions).
func (s *Server) auditAs(r *http.Request, action, target string) {
	s.cfg.Accounts.Record(r.Context(), identity.PrincipalFrom(r.Context()), action, target, nil)
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) {
	rec, err := s.svc.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	s.svc.Touch(r.Context(), rec)
	httpx.WriteJSON(w, http.StatusOK, toWire(rec))
}

func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f := store.ListFilter{Page: 1, PageSize: 20}
	for _, st := range q["state"] {
		state, err := sandbox.ParseState(st)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		f.States = append(f.States, state)
	}
	if md := q.Get("metadata"); md != "" {
		vals, err := url.ParseQuery(md)
		if err != nil {
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "metadata filter must be url-encoded key=value pairs joined by &: %v", err))
			return
		}
		f.Metadata = map[string]string{}
		for k, v := range vals {
			f.Metadata[k] = v[len(v)-1]
		}
	}
	for _, p := range []struct {
		name string
		dst  *int
		max  int
	}{{"page", &f.Page, 1 << 20}, {"pageSize", &f.PageSize, 200}} {
		if v := q.Get(p.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > p.max {
				httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s must be an integer from 1 to %d, got %q", p.name, p.max, v))
				return
			}
			*p.dst = n
		}
	}
	if p := identity.PrincipalFrom(r.Context()); !p.IsAdmin() {
		f.OwnerID = p.UserID
	}
	recs, total, err := s.svc.List(r.Context(), f)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	resp := ListSandboxesResponse{Items: make([]Sandbox, 0, len(recs))}
	for _, rec := range recs {
		resp.Items = append(resp.Items, toWire(rec))
	}
	pages := (total + f.PageSize - 1) / f.PageSize
	resp.Pagination = PaginationInfo{Page: f.Page, PageSize: f.PageSize, TotalItems: total, TotalPages: pages, HasNextPage: f.Page < pages}
	httpx.WriteJSON(w, http.StatusOK, resp)
}

func (s *Server) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	s.boxOp(w, r, func() error { return s.svc.Delete(r.Context(), r.PathValue("id"), "user_delete") }, http.StatusNoContent)
}

func (s *Server) pauseSandbox(w http.ResponseWriter, r *http.Request) {
	s.boxOp(w, r, func() error { _, err := s.svc.Pause(r.Context(), r.PathValue("id")); return err }, http.StatusAccepted)
}

func (s *Server) resumeSandbox(w http.ResponseWriter, r *http.Request) {
	s.boxOp(w, r, func() error { _, err := s.svc.Resume(r.Context(), r.PathValue("id")); return err }, http.StatusAccepted)
}

func (s *Server) renewSandbox(w http.ResponseWriter, r *http.Request) {
	body, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	id := r.PathValue("id")
	s.idempotent(w, r, "renew:"+callerID(r)+":"+id, body, func() (int, any, error) {
		var req RenewRequest
		if err := httpx.DecodeBytes(body, &req); err != nil {
			return 0, nil, err
		}
		if req.ExpiresAt.IsZero() {
			return 0, nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "expiresAt is required (RFC 3339)")
		}
		rec, err := s.svc.Renew(r.Context(), id, req.ExpiresAt)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, RenewResponse{ExpiresAt: *rec.ExpiresAt}, nil
	})
}

func (s *Server) patchMetadata(w http.ResponseWriter, r *http.Request) {
	var patch map[string]*string
	if err := s.decode(w, r, &patch); err != nil {
		httpx.WriteError(w, err)
		return
	}
	rec, err := s.svc.PatchMetadata(r.Context(), r.PathValue("id"), patch)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, toWire(rec))
}
