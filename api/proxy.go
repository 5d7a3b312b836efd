package api

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/exactbody"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// HeaderProxyToken carries a signed, expiring grant to one port of one
// sandbox; endpoints hand it out so SDKs need not send the API key to the
// proxy. It may also be given as the query parameter astrabox_token and,
// for execd's port, under execd's own header (wire.HeaderAccessToken),
// which is the one the OpenSandbox SDKs send to execd: the proxy checks
// it there and replaces it by the box's real access token. On an endpoint
// host, a token given in the query is also kept in a cookie of that host
// (endpointCookie), for the page's other requests.
const HeaderProxyToken = "X-AstraBox-Proxy-Token"

// endpointHeaders are the headers an endpoint of port tells clients to
// send: the signed token, and for execd's port the same token under
// execd's header too.
func endpointHeaders(port int, token string) map[string]string {
	h := map[string]string{HeaderProxyToken: token}
	if port == wire.DefaultPort {
		h[wire.HeaderAccessToken] = token
	}
	return h
}

// signToken grants user access to sandbox id's port until exp. The token
// names its user, so the proxy can check at every request that the user
// still may (disabled, demoted or no longer the owner: refused).
func (s *Server) signToken(id string, port int, user string, exp time.Time) string {
	u := base64.RawURLEncoding.EncodeToString([]byte(user))
	payload := fmt.Sprintf("%s.%d.%d.%s", id, port, exp.Unix(), u)
	mac := hmac.New(sha256.New, s.cfg.SigningKey)
	mac.Write([]byte(payload))
	return strconv.FormatInt(exp.Unix(), 10) + "." + u + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// checkToken verifies a token for id and port and that it has not
// expired, and returns the user it was handed to.
func (s *Server) checkToken(tok, id string, port int) (string, bool) {
	expStr, rest, ok := strings.Cut(tok, ".")
	if !ok {
		return "", false
	}
	u, _, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	exp, err := strconv.ParseInt(expStr, 10, 64)
	if err != nil || time.Now().Unix() > exp {
		return "", false
	}
	user, err := base64.RawURLEncoding.DecodeString(u)
	if err != nil {
		return "", false
	}
	want := s.signToken(id, port, string(user), time.Unix(exp, 0))
	return string(user), hmac.Equal([]byte(want), []byte(tok))
}

func parsePort(s string) (int, error) {
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "port must be an integer from 1 to 65535, got %q", s)
	}
	return p, nil
}

// sandboxHostSuffix marks the host of an upstream URL as a sandbox id,
// so one pooled transport serves every sandbox.
const sandboxHostSuffix = ".sandbox"

// newProxyTransport returns the transport of the proxy: it reaches the
// execd of the sandbox named by the request's host, through its backend.
func (s *Server) newProxyTransport() *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			host, _, err := net.SplitHostPort(addr)
			if err != nil {
				host = addr
			}
			rec, err := s.svc.Get(ctx, strings.TrimSuffix(host, sandboxHostSuffix))
			if err != nil {
				return nil, err
			}
			return s.svc.Dial(ctx, rec)
		},
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     60 * time.Second,
	}
}

// maxTokenLifetime bounds how far ahead `expires` may put a token's expiry.
const maxTokenLifetime = 7 * 24 * time.Hour

// parseExpires reads the `expires` query parameter of an endpoint request
// as the time its token stops working. The specification (and the
// OpenSandbox SDKs' getSignedEndpoint) gives Unix epoch seconds; AstraBox
// also takes, as before, a lifetime of 1 to 604800 seconds. The two cannot
// be confused: every epoch time in that range lies in January 1970. Either
// way the expiry must be in the future and at most 7 days ahead.
func parseExpires(v string, now time.Time) (time.Time, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return time.Time{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
			"expires must be Unix epoch seconds (or a lifetime of 1 to %d seconds), got %q", int64(maxTokenLifetime/time.Second), v)
	}
	if n <= int64(maxTokenLifetime/time.Second) {
		return now.Add(time.Duration(n) * time.Second), nil
	}
	at := time.Unix(n, 0)
	switch {
	case !at.After(now):
		return time.Time{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "expires %d (%s) is not in the future", n, at.UTC().Format(time.RFC3339))
	case at.After(now.Add(maxTokenLifetime)):
		return time.Time{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "expires %d (%s) is more than 7 days ahead", n, at.UTC().Format(time.RFC3339))
	}
	return at, nil
}

// getEndpoint returns the endpoint of a port: with an endpoint domain
// configured, the port's own origin {port}-{id}.{domain}[:port] (a host,
// no path: clients add their scheme and the box's paths), otherwise, or
// with use_server_proxy=true, the server proxy on the API's host,
// host/v1/sandboxes/{id}/proxy/{port}. `expires` sets when its signed token
// stops working (see parseExpires; default: when the sandbox expires, or in
// 24 hours).
func (s *Server) getEndpoint(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	serverProxy := false
	if v := r.URL.Query().Get("use_server_proxy"); v != "" {
		if serverProxy, err = strconv.ParseBool(v); err != nil {
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "use_server_proxy must be true or false, got %q", v))
			return
		}
	}
	rec, err := s.svc.Get(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	exp := time.Now().Add(24 * time.Hour)
	if rec.ExpiresAt != nil {
		exp = *rec.ExpiresAt
	}
	if v := r.URL.Query().Get("expires"); v != "" {
		if exp, err = parseExpires(v, time.Now()); err != nil {
			httpx.WriteError(w, err)
			return
		}
	}
	exp = exp.Truncate(time.Second).UTC()
	endpoint := fmt.Sprintf("%s/v1/sandboxes/%s/proxy/%d", s.publicHost(r), id, port)
	if s.epHost != "" && !serverProxy {
		endpoint = s.endpointHostname(rec.ID, port)
	}
	httpx.WriteJSON(w, http.StatusOK, Endpoint{
		Endpoint:  endpoint,
		Headers:   endpointHeaders(port, s.signToken(id, port, identity.PrincipalFrom(r.Context()).UserID, exp)),
		ExpiresAt: &exp,
	})
}

// boxOrigin is where a proxied request came in, which decides what of the
// box's response passes (see boxorigin.go).
type boxOrigin int

const (
	// sharedOrigin is /v1/sandboxes/{id}/proxy/{port}/... on the origin of
	// the console and the API.
	sharedOrigin boxOrigin = iota
	// endpointOrigin is {port}-{id}.{EndpointDomain}, the box's own.
	endpointOrigin
)

// proxy serves the shared origin's proxy routes.
func (s *Server) proxy(w http.ResponseWriter, r *http.Request) { s.serveProxy(w, r, sharedOrigin) }

// serveProxy forwards a request to a port of a sandbox (the path values
// id, port and rest) through its execd: the execd port itself goes to
// execd's API, any other port through execd's /proxy/{port}. HTTP, SSE
// (unbuffered) and WebSocket pass; query strings (less astrabox_token) and
// bodies are untouched. A closed port answers 502 UPSTREAM_UNREACHABLE.
// On the shared origin a service worker script is refused (403
// SERVICE_WORKER_REFUSED), the Cookie header is not forwarded and the
// response is confined (confineShared); on an endpoint origin the endpoint
// cookie authenticates too and is not forwarded, and the response keeps
// its cookies on the host (confineEndpoint).
func (s *Server) serveProxy(w http.ResponseWriter, r *http.Request, origin boxOrigin) {
	id := r.PathValue("id")
	port, err := parsePort(r.PathValue("port"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if origin == sharedOrigin && refuseServiceWorker(w, r) {
		return
	}
	// An endpoint token or a key; either way the user must still own the
	// box and may write (a box's port does what it is asked).
	var p *identity.Principal
	if user, ok := s.tokenUser(w, r, id, port, origin); ok {
		p, err = s.auth.PrincipalOf(r.Context(), user)
	} else {
		p, err = s.authenticateKey(r)
	}
	if err != nil {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeUnauthorized, "the proxy needs an API key or a valid endpoint token"))
		return
	}
	if !p.Can(identity.ScopeWrite) {
		httpx.WriteError(w, identity.Forbidden("the sandbox proxy needs the write permission"))
		return
	}
	if err := s.checkBoxOwner(r.Context(), p, id); err != nil {
		httpx.WriteError(w, err)
		return
	}
	if port == egress.InBoxAPIPort { // OpenSandbox's egress API, served here (egress.go)
		s.serveEgressAPI(w, r, id)
		return
	}
	rec, err := s.svc.Get(r.Context(), id)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if s.forwardElsewhere(w, r, rec) {
		return
	}
	if rec.State != sandbox.StateRunning {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeConflict, "sandbox %s is %s, not Running", id, rec.State))
		return
	}
	token, err := s.svc.AccessToken(r.Context(), rec)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	s.svc.Touch(r.Context(), rec)
	rest := "/" + r.PathValue("rest")
	target := rest
	if port != wire.DefaultPort {
		target = fmt.Sprintf("/proxy/%d%s", port, rest)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = id + sandboxHostSuffix
			pr.Out.URL.Path = target
			pr.Out.URL.RawPath = ""
			pr.Out.Host = "execd"
			pr.Out.Header.Del(HeaderAPIKey)
			pr.Out.Header.Del(HeaderProxyToken)
			q := pr.Out.URL.Query()
			if q.Has("astrabox_token") {
				q.Del("astrabox_token")
				pr.Out.URL.RawQuery = q.Encode()
			}
			switch origin {
			case sharedOrigin:
				// The browser's cookies here are the console's.
				pr.Out.Header.Del("Cookie")
			case endpointOrigin:
				cookies := pr.Out.Header.Values("Cookie")
				pr.Out.Header.Del("Cookie")
				for _, c := range cookies {
					if c = withoutCookie(c, endpointCookie); c != "" {
						pr.Out.Header.Add("Cookie", c)
					}
				}
			}
			pr.Out.Header.Set(wire.HeaderAccessToken, token)
			pr.SetXForwarded()
			pr.Out.Body = exactbody.Wrap(pr.Out.Body, pr.Out.ContentLength)
		},
		// Also called for a WebSocket upgrade's 101, whose headers a browser
		// honours as well.
		ModifyResponse: func(resp *http.Response) error {
			if origin == sharedOrigin {
				confineShared(resp.Header)
			} else {
				confineEndpoint(resp.Header)
			}
			return nil
		},
		Transport:     s.transport,
		FlushInterval: -1,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// The transport's error (addresses, sockets) is for the log only.
			httpx.WriteError(w, &sandbox.Error{Code: sandbox.CodeUpstreamUnreachable, Message: fmt.Sprintf("sandbox %s: cannot reach its execd", id), Err: err})
		},
	}
	rp.ServeHTTP(w, r)
}

// tokenUser returns the user of a valid endpoint token r carries for
// port of sandbox id: in HeaderProxyToken, the astrabox_token query
// parameter, execd's header for execd's port, or on an endpoint origin the
// endpoint cookie. A valid token from the query on an endpoint origin is
// kept in the endpoint cookie (setEndpointCookie).
func (s *Server) tokenUser(w http.ResponseWriter, r *http.Request, id string, port int, origin boxOrigin) (string, bool) {
	if tok := r.Header.Get(HeaderProxyToken); tok != "" {
		if user, ok := s.checkToken(tok, id, port); ok {
			return user, true
		}
	}
	if port == wire.DefaultPort {
		if tok := r.Header.Get(wire.HeaderAccessToken); tok != "" {
			if user, ok := s.checkToken(tok, id, port); ok {
				return user, true
			}
		}
	}
	if tok := r.URL.Query().Get("astrabox_token"); tok != "" {
		if user, ok := s.checkToken(tok, id, port); ok {
			if origin == endpointOrigin {
				setEndpointCookie(w, r, tok)
			}
			return user, true
		}
	}
	if origin == endpointOrigin {
		for _, c := range r.CookiesNamed(endpointCookie) {
			if user, ok := s.checkToken(c.Value, id, port); ok {
				return user, true
			}
		}
	}
	return "", false
}
