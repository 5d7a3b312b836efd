package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Rule is a registered route and the scope a caller needs for it.
type Rule struct {
	Pattern string
	Need    identity.Scope
}

// Rules returns every route registered behind authentication, in the
// order of registration, with the scope each needs. The routes served
// without it (health, the console's page and assets, the OpenAPI
// document, the proxy, the Shipyard facade) authenticate in their own way
// or serve nothing private; see routes.
func (s *Server) Rules() []Rule { return append([]Rule(nil), s.rules...) }

// presentedKey returns the key r carries: the OpenSandbox header, else,
// where bearer is true, an "Authorization: Bearer" token. The OpenSandbox
// routes and the sandbox proxy take the header only, as OpenSandbox does
// (an Authorization header there may be meant for the box); the
// platform's and identity's routes and the Shipyard facade take both.
func presentedKey(r *http.Request, bearer bool) string {
	if key := r.Header.Get(HeaderAPIKey); key != "" || !bearer {
		return key
	}
	scheme, token, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "Bearer") {
		return strings.TrimSpace(token)
	}
	return ""
}

// PublicRoutes returns the sign-in routes, served to anyone: they
// authenticate with their own cookies.
func (s *Server) PublicRoutes() []string { return append([]string(nil), s.public...) }

// authenticate returns the caller of r, or UNAUTHORIZED / TOKEN_EXPIRED:
// the key it presents (the OpenSandbox header or a bearer token), else a
// gateway's headers (Config.Gateway), else a browser's session cookie.
// A write authenticated by a cookie or the gateway must pass checkCSRF.
func (s *Server) authenticate(r *http.Request) (*identity.Principal, error) {
	return s.authenticateAs(r, true)
}

// authenticateAs is authenticate, with bearer tokens taken where bearer
// is true (presentedKey).
func (s *Server) authenticateAs(r *http.Request, bearer bool) (*identity.Principal, error) {
	if key := presentedKey(r, bearer); key != "" {
		return s.auth.Authenticate(r.Context(), key)
	}
	if s.cfg.Gateway.Present(r) {
		// The gateway's own cookie rides along with any page's request.
		if err := checkCSRF(r); err != nil {
			return nil, err
		}
		return s.cfg.Gateway.Authenticate(r, s.cfg.Accounts, s.auth)
	}
	c, err := r.Cookie(identityapi.SessionCookieName(s.secureCookies(r)))
	if err != nil {
		return s.auth.Authenticate(r.Context(), "")
	}
	if err := checkCSRF(r); err != nil {
		return nil, err
	}
	return s.auth.AuthenticateWebSession(r.Context(), c.Value)
}

// checkCSRF refuses a write (any method but GET, HEAD and OPTIONS) that
// a browser may have sent on another page's behalf: it must carry
// identityapi.CSRFHeader and, when the browser names one, come from this
// origin.
func checkCSRF(r *http.Request) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if r.Header.Get(identityapi.CSRFHeader) == "" || !identityapi.SameOrigin(r) {
		return identity.Forbidden("a write signed in by a browser's cookie or a gateway needs the %s header and this origin", identityapi.CSRFHeader)
	}
	return nil
}

// secureCookies reports whether the sign-in cookies of r are the Secure,
// host-only kind (identityapi.SessionCookieName).
func (s *Server) secureCookies(r *http.Request) bool {
	return r.TLS != nil || (s.cfg.Web != nil && s.cfg.Web.Secure)
}

// authenticateKey returns the caller of r by the key it presents only
// (the sandbox proxy: a browser reaches a box with an endpoint token, never
// with its session cookie).
func (s *Server) authenticateKey(r *http.Request) (*identity.Principal, error) {
	return s.auth.Authenticate(r.Context(), presentedKey(r, false))
}

// handle registers a route that needs scope need (handleRoute).
func (s *Server) handle(pattern string, need identity.Scope, h http.HandlerFunc) {
	s.handleRoute(httpx.Route{Pattern: pattern, Need: string(need), Handler: h})
}

// handleRoutes registers routes a route package hands the server.
func (s *Server) handleRoutes(routes []httpx.Route) {
	for _, rt := range routes {
		s.handleRoute(rt)
	}
}

// handleRoute registers rt: the caller is authenticated (authenticate),
// refused with FORBIDDEN without the scope rt needs, and refused with
// SANDBOX_NOT_FOUND on a route of a sandbox ({id} under /sandboxes/) it
// does not own; the handler then finds the caller with
// identity.PrincipalFrom. A successful answer of a route with an Audit
// action is recorded in the audit log (audit).
func (s *Server) handleRoute(rt httpx.Route) {
	need := identity.Scope(rt.Need)
	if !need.Valid() {
		panic("api: route " + rt.Pattern + " needs an unknown scope " + rt.Need)
	}
	s.rules = append(s.rules, Rule{Pattern: rt.Pattern, Need: need})
	boxRoute := strings.Contains(rt.Pattern, "/sandboxes/{id}")
	bearer := strings.Contains(rt.Pattern, " /api/")
	s.mux.HandleFunc(rt.Pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticateAs(r, bearer)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		if !p.Can(need) {
			httpx.WriteError(w, identity.Forbidden("%s %s needs the %s permission", r.Method, r.URL.Path, need))
			return
		}
		if need == identity.ScopeAdmin && r.Method != http.MethodGet && !p.Can(identity.ScopeWrite) {
			// An administrator's change is a write: a read-and-admin
			// (auditor's) key only reads.
			httpx.WriteError(w, identity.Forbidden("%s %s needs the write permission", r.Method, r.URL.Path))
			return
		}
		ctx := identity.WithPrincipal(r.Context(), p)
		if boxRoute {
			if err := s.checkBoxOwner(ctx, p, r.PathValue("id")); err != nil {
				httpx.WriteError(w, err)
				return
			}
		}
		r = r.WithContext(ctx)
		if rt.Audit == "" || r.Header.Get(httpx.HeaderForwarded) != "" { // the first replica records it
			rt.Handler(w, r)
			return
		}
		sw := metrics.NewStatusRecorder(w)
		rt.Handler(sw, r)
		if sw.Status >= 200 && sw.Status < 300 {
			s.audit(r, p, rt.Audit)
		}
	})
}

// audit records action, done by p in r, in the audit log: the target is
// the action's first word and the route's first of {id}, {sid}, {name};
// the other path values are the detail.
func (s *Server) audit(r *http.Request, p *identity.Principal, action string) {
	kind, _, _ := strings.Cut(action, ".")
	target, detail := kind, map[string]any{}
	for _, name := range []string{"id", "sid", "name"} {
		v := r.PathValue(name)
		switch {
		case v == "":
		case target == kind:
			target += ":" + v
		default:
			detail[name] = v
		}
	}
	if len(detail) == 0 {
		detail = nil
	}
	s.cfg.Accounts.Record(r.Context(), p, action, target, detail)
}

// checkBoxOwner answers SANDBOX_NOT_FOUND, as for a missing box, unless p
// owns sandbox id or is an administrator: nothing tells a caller that
// another user's box exists.
func (s *Server) checkBoxOwner(ctx context.Context, p *identity.Principal, id string) error {
	if p.IsAdmin() {
		return nil
	}
	rec, err := s.cfg.Store.GetSandbox(ctx, id)
	if err == nil && p.Owns(rec.OwnerID) {
		return nil
	}
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("check the sandbox's owner: %w", err)
	}
	return sandbox.Errorf(sandbox.CodeSandboxNotFound, "sandbox %q not found", id)
}

// ownerOf returns who a sandbox made by the caller of ctx belongs to.
func ownerOf(ctx context.Context) lifecycle.Owner {
	p := identity.PrincipalFrom(ctx)
	return lifecycle.Owner{UserID: p.UserID, OrgID: p.OrgID}
}
