package identityapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/oidc"
	"github.com/astrabox/astrabox/identity/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The cookies of browser sign-in. The session cookie is the server's, on
// the console's origin only (box content is served on other origins or in
// an opaque one, and never sees it); the flow cookie lives only on the
// sign-in routes, for the few minutes a sign-in takes.
//
// Served over TLS (or with Web.Secure), both carry the __Host- prefix: a
// browser then takes them only Secure, for this host alone and with no
// Domain, so no page of a sibling host (a box's endpoint origin under the
// same parent domain) can plant one.
const (
	SessionCookie = "astrabox_session"
	flowCookie    = "astrabox_flow"
	flowPath      = "/api/v1/auth/"
	flowLife      = 10 * time.Minute
)

// SessionCookieName is the session cookie's name: with the __Host-
// prefix when secure.
func SessionCookieName(secure bool) string {
	if secure {
		return "__Host-" + SessionCookie
	}
	return SessionCookie
}

// flowCookieAt returns the flow cookie's name and path: the __Host- kind
// (whose path must be /) when secure.
func flowCookieAt(secure bool) (name, path string) {
	if secure {
		return "__Host-" + flowCookie, "/"
	}
	return flowCookie, flowPath
}

// CSRFHeader is the header a browser's cookie-authenticated write must
// carry (the console sends it): a page of another origin cannot send it
// without a CORS preflight this server never grants.
const CSRFHeader = "X-AstraBox-CSRF"

// Web configures browser sign-in through an OpenID Connect provider.
type Web struct {
	// OIDC is the provider; nil offers no sign-in (keys only).
	OIDC *oidc.Provider
	// Name is shown on the console's sign-in button (default: the
	// issuer's host).
	Name string
	// AdminGroups are the provider groups whose members are
	// administrators; DefaultRole is everyone else's first role (default
	// member).
	AdminGroups []string
	DefaultRole identity.Role
	// SessionTTL is how long a sign-in lasts (default 12 hours).
	SessionTTL time.Duration
	// FlowKey signs the flow cookie (32 random bytes; the server's signing
	// key).
	FlowKey []byte
	// Secure marks the cookies Secure (the server is reached over TLS);
	// a request that arrived over TLS gets Secure cookies regardless.
	Secure bool
	Logger *slog.Logger
}

// PublicRoutes returns the sign-in routes, which authenticate in their own
// way (the flow cookie, the session cookie) or answer anyone:
// GET auth/session says what sign-in is offered and who is signed in.
func (h *Handler) PublicRoutes() []httpx.Route {
	return []httpx.Route{
		{Pattern: "GET /api/v1/auth/session", Handler: h.session},
		{Pattern: "GET /api/v1/auth/login", Handler: h.login},
		{Pattern: "GET /api/v1/auth/callback", Handler: h.callback},
		{Pattern: "POST /api/v1/auth/logout", Handler: h.logout},
		{Pattern: "GET /api/v1/auth/cli", Handler: h.cliLogin},
		{Pattern: "POST /api/v1/auth/cli", Handler: h.cliLogin},
	}
}

// AuthSession answers GET /api/v1/auth/session.
type AuthSession struct {
	// Provider is the sign-in offered, or null (keys only).
	Provider *AuthProvider `json:"provider"`
	// User is who the session cookie signs in, or null.
	User *wire.User `json:"user"`
	// CSRFHeader is the header cookie-authenticated writes must carry.
	CSRFHeader string `json:"csrf_header"`
}

// AuthProvider names the sign-in offered.
type AuthProvider struct {
	Name     string `json:"name"`
	Issuer   string `json:"issuer"`
	LoginURL string `json:"login_url"`
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request) {
	out := AuthSession{CSRFHeader: CSRFHeader}
	if web := h.cfg.Web; web != nil && web.OIDC != nil {
		name := web.Name
		if name == "" {
			if u, err := url.Parse(web.OIDC.Issuer()); err == nil {
				name = u.Host
			}
		}
		out.Provider = &AuthProvider{Name: name, Issuer: web.OIDC.Issuer(), LoginURL: "/api/v1/auth/login"}
	}
	if c, err := r.Cookie(SessionCookieName(h.cfg.Web.secure(r))); err == nil {
		if p, err := h.cfg.Auth.AuthenticateWebSession(r.Context(), c.Value); err == nil {
			if u, err := h.acc.GetUser(r.Context(), p.UserID); err == nil {
				out.User = &u
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusOK, out)
}

// SafeNext returns next when it is a path of this origin ("/console#x"),
// else "/": never another host, scheme or a protocol-relative "//host".
func SafeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") ||
		strings.ContainsAny(next, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil {
		return "/"
	}
	return next
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	web := h.cfg.Web
	if web == nil || web.OIDC == nil {
		httpx.WriteError(w, identity.Forbidden("this server offers no sign-in through an identity provider; use an API key"))
		return
	}
	authURL, flow, err := web.OIDC.Start(r.Context(), SafeNext(r.URL.Query().Get("next")))
	if err != nil {
		web.logger().Warn("sign-in: the identity provider is unreachable", "err", err)
		httpx.WriteError(w, errUnavailable())
		return
	}
	value, err := web.sealFlow(flow, time.Now())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	name, path := flowCookieAt(web.secure(r))
	http.SetCookie(w, &http.Cookie{Name: name, Value: value, Path: path, MaxAge: int(flowLife / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: web.secure(r)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusFound)
}

// callback finishes a sign-in. Any failure sends the browser to
// /?sign_in_error=<reason> (the console shows it) and never signs in.
func (h *Handler) callback(w http.ResponseWriter, r *http.Request) {
	web := h.cfg.Web
	fail := func(reason string, err error) {
		if web != nil {
			web.logger().Warn("sign-in refused", "reason", reason, "err", err)
		}
		name, path := flowCookieAt(web.secure(r))
		clearCookie(w, r, name, path, web)
		http.Redirect(w, r, "/?sign_in_error="+url.QueryEscape(reason), http.StatusFound)
	}
	if web == nil || web.OIDC == nil {
		fail("not_offered", nil)
		return
	}
	flowName, flowCookiePath := flowCookieAt(web.secure(r))
	c, err := r.Cookie(flowName)
	if err != nil {
		fail("no_flow", err)
		return
	}
	flow, err := web.openFlow(c.Value, time.Now())
	if err != nil {
		fail("bad_flow", err)
		return
	}
	q := r.URL.Query()
	if e := q.Get("error"); e != "" {
		fail("provider_refused", errors.New(e))
		return
	}
	ext, err := web.OIDC.Finish(r.Context(), flow, q.Get("state"), q.Get("code"))
	if err != nil {
		fail("invalid_token", err)
		return
	}
	role := web.DefaultRole
	if role == "" {
		role = identity.RoleMember
	}
	u, err := h.acc.SignIn(r.Context(), identity.External{Issuer: ext.Issuer, Subject: ext.Subject, Email: ext.Email,
		Name: ext.Name, Admin: ext.InGroup(web.AdminGroups)}, role)
	if err != nil {
		fail("user_refused", err)
		return
	}
	ttl := web.SessionTTL
	if ttl <= 0 {
		ttl = 12 * time.Hour
	}
	value, expires, err := h.cfg.Auth.StartWebSession(r.Context(), u.ID, flow.ID, ttl)
	if err != nil {
		fail("flow_used", err)
		return
	}
	h.acc.RecordSignIn(r.Context(), u.ID, "oidc")
	clearCookie(w, r, flowName, flowCookiePath, web)
	http.SetCookie(w, &http.Cookie{Name: SessionCookieName(web.secure(r)), Value: value, Path: "/", Expires: expires,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: web.secure(r)})
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, SafeNext(flow.Next), http.StatusFound)
}

// logout ends the session of the request's cookie (on every replica) and
// clears it. It is a cookie-authenticated write: it needs CSRFHeader.
func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(CSRFHeader) == "" || !SameOrigin(r) {
		httpx.WriteError(w, identity.Forbidden("signing out needs the %s header from the console's origin", CSRFHeader))
		return
	}
	if c, err := r.Cookie(SessionCookieName(h.cfg.Web.secure(r))); err == nil {
		if p, err := h.cfg.Auth.AuthenticateWebSession(r.Context(), c.Value); err == nil {
			h.acc.Record(r.Context(), p, "user.sign_out", "user:"+p.UserID, nil)
		}
		if err := h.cfg.Auth.EndWebSession(r.Context(), c.Value); err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	clearCookie(w, r, SessionCookieName(h.cfg.Web.secure(r)), "/", h.cfg.Web)
	w.WriteHeader(http.StatusNoContent)
}

// SameOrigin reports whether r's Origin header, when present, is the
// origin r was sent to.
func SameOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host && (u.Scheme == "http" || u.Scheme == "https")
}

func clearCookie(w http.ResponseWriter, r *http.Request, name, path string, web *Web) {
	http.SetCookie(w, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteLaxMode, Secure: web.secure(r)})
}

func (web *Web) secure(r *http.Request) bool { return r.TLS != nil || (web != nil && web.Secure) }

func (web *Web) logger() *slog.Logger {
	if web.Logger != nil {
		return web.Logger
	}
	return slog.Default()
}

// sealedFlow is the flow cookie's content.
type sealedFlow struct {
	Flow    oidc.Flow `json:"f"`
	Expires int64     `json:"e"`
}

// sealFlow returns flow as a cookie value signed with FlowKey, valid for
// flowLife from now.
func (web *Web) sealFlow(flow oidc.Flow, now time.Time) (string, error) {
	b, err := json.Marshal(sealedFlow{Flow: flow, Expires: now.Add(flowLife).Unix()})
	if err != nil {
		return "", err
	}
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + web.mac(payload), nil
}

// openFlow returns the flow of a cookie value sealFlow made, unless it is
// forged, altered or expired.
func (web *Web) openFlow(value string, now time.Time) (oidc.Flow, error) {
	payload, sig, ok := strings.Cut(value, ".")
	if !ok || len(web.FlowKey) == 0 || !hmac.Equal([]byte(sig), []byte(web.mac(payload))) {
		return oidc.Flow{}, errors.New("the flow cookie's signature is not valid")
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return oidc.Flow{}, err
	}
	var sf sealedFlow
	if err := json.Unmarshal(b, &sf); err != nil {
		return oidc.Flow{}, err
	}
	if now.Unix() > sf.Expires {
		return oidc.Flow{}, errors.New("the sign-in flow expired")
	}
	return sf.Flow, nil
}

func (web *Web) mac(payload string) string {
	m := hmac.New(sha256.New, web.FlowKey)
	m.Write([]byte("astrabox-flow\x00" + payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func errUnavailable() error {
	return sandbox.Errorf(sandbox.CodeUnavailable, "the identity provider cannot be reached; try again shortly")
}
