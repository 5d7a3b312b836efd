package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/sandbox"
)

// Box content and the console's origin.
//
// A box's web content must never run with the powers of the origin that
// serves the console and the API: a page there could register a service
// worker over the whole origin (which then sees every request the console
// makes, its API key included), and set or clear the console's cookies and
// storage. The port proxy serves a box in one of two ways:
//
//   - On an origin of its own, with Config.EndpointDomain: a request whose
//     Host is {port}-{id}.{domain} reaches that port of that box and
//     nothing else (no API route, no console), and endpoints are handed out
//     there. The origin is the box's, so its responses pass as the box
//     wrote them, except cookies scoped beyond the host (a Domain
//     attribute), which would reach sibling boxes or the parent domain.
//   - On the shared origin, /v1/sandboxes/{id}/proxy/{port}/...: always
//     served, for API clients and where no endpoint domain is configured.
//     There every response from the box is confined (confineShared): it
//     carries Content-Security-Policy: sandbox without allow-same-origin, so
//     a page runs in an opaque origin (no service worker, no cookie or
//     storage of the console's origin), and the headers that act on the
//     whole origin are removed. Requests for service worker scripts are
//     refused, and the browser's cookies for the origin never reach the box.

// sharedOriginSandbox is the Content-Security-Policy every box response on
// the shared origin carries: the page may run scripts, forms, popups,
// dialogs and downloads, but without allow-same-origin it runs in an
// opaque origin, so it cannot register a service worker or read the
// cookies and storage of the console's origin. A policy the box sends
// itself is kept; a browser enforces both.
const sharedOriginSandbox = "sandbox allow-scripts allow-forms allow-modals allow-popups allow-popups-to-escape-sandbox " +
	"allow-downloads allow-pointer-lock allow-presentation allow-orientation-lock"

// sharedOriginDropped are the response headers a box may not send on the
// shared origin: each acts on the whole origin (or host), not on the
// response that carries it. Headers that act on one document only
// (Permissions-Policy, Cross-Origin-*-Policy, X-Frame-Options, a
// navigation such as Location or Refresh) pass.
var sharedOriginDropped = []string{
	// Widens a service worker's scope beyond its script's directory, up
	// to the console's pages.
	"Service-Worker-Allowed",
	// Cookies are the host's: a Path attribute is no boundary.
	"Set-Cookie",
	"Set-Cookie2",
	// Clears the console's storage, cookies and service workers.
	"Clear-Site-Data",
	// Decides the agent cluster of the whole origin.
	"Origin-Agent-Cluster",
	// The host's (and its subdomains') transport policy.
	"Strict-Transport-Security",
	"Public-Key-Pins",
	"Public-Key-Pins-Report-Only",
	"Expect-CT",
	// Moves the whole origin's traffic to another server.
	"Alt-Svc",
	// Reports for the whole origin, with every request's URL.
	"NEL",
	"Report-To",
	// Client hints the browser remembers for the origin.
	"Accept-CH",
	"Critical-CH",
	// The origin's signed-in status (FedCM).
	"Set-Login",
}

// confineShared makes a box's response headers safe to serve on the
// shared origin (see above). It also removes Link values that would
// install a service worker (rel=serviceworker).
func confineShared(h http.Header) {
	for _, k := range sharedOriginDropped {
		h.Del(k)
	}
	if links := h.Values("Link"); len(links) > 0 {
		h.Del("Link")
		for _, v := range links {
			if !strings.Contains(strings.ToLower(v), "serviceworker") {
				h.Add("Link", v)
			}
		}
	}
	h.Add("Content-Security-Policy", sharedOriginSandbox)
}

// confineEndpoint keeps a box's cookies on its own endpoint host: a
// Set-Cookie with a Domain attribute (which would reach sibling boxes or
// the parent domain) is removed; host-only cookies pass.
func confineEndpoint(h http.Header) {
	cookies := h.Values("Set-Cookie")
	if len(cookies) == 0 {
		return
	}
	h.Del("Set-Cookie")
	for _, c := range cookies {
		if !cookieHasDomain(c) {
			h.Add("Set-Cookie", c)
		}
	}
}

// cookieHasDomain reports whether a Set-Cookie value has a Domain
// attribute (with any value: an empty one is ignored by some browsers,
// honoured by none, and refused here all the same).
func cookieHasDomain(setCookie string) bool {
	attrs := strings.Split(setCookie, ";")
	for _, a := range attrs[1:] {
		name, _, _ := strings.Cut(a, "=")
		if strings.EqualFold(strings.TrimSpace(name), "domain") {
			return true
		}
	}
	return false
}

// CodeServiceWorkerRefused answers a request for a service worker script
// on the shared origin (403): a box's worker would control the console.
const CodeServiceWorkerRefused sandbox.Code = "SERVICE_WORKER_REFUSED"

func init() { sandbox.RegisterStatus(CodeServiceWorkerRefused, http.StatusForbidden) }

// refuseServiceWorker answers, and reports true, when r is a browser's
// fetch of a service worker script, which the shared origin never serves.
// When the browser itself says so (Sec-Fetch-Dest, which no page can set),
// the answer also clears the origin's storage: the fetch is then an
// update of a worker a box registered before this refusal existed, and
// clearing is what removes it (and may sign the console out once).
func refuseServiceWorker(w http.ResponseWriter, r *http.Request) bool {
	byBrowser := strings.EqualFold(r.Header.Get("Sec-Fetch-Dest"), "serviceworker")
	if !byBrowser && !strings.EqualFold(r.Header.Get("Service-Worker"), "script") {
		return false
	}
	if byBrowser {
		w.Header().Set("Clear-Site-Data", `"storage"`)
	}
	httpx.WriteError(w, sandbox.Errorf(CodeServiceWorkerRefused,
		"service workers are not served on the console's origin; serve the sandbox on an endpoint domain (astrabox serve --endpoint-domain)"))
	return true
}

// ParseEndpointDomain checks an endpoint domain, a DNS name with an
// optional :port (for example "box.example.com" or "box.localhost:8080"),
// and returns its host, in lower case, and its port ("" without one).
// Schemes, paths, wildcards and IP addresses are refused.
func ParseEndpointDomain(s string) (host, port string, err error) {
	host = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(s)), ".")
	if strings.Contains(host, ":") {
		if host, port, err = net.SplitHostPort(host); err != nil {
			return "", "", fmt.Errorf("endpoint domain %q: %w", s, err)
		}
		if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
			return "", "", fmt.Errorf("endpoint domain %q: port %q is not from 1 to 65535", s, port)
		}
	}
	if host == "" {
		return "", "", fmt.Errorf("endpoint domain %q: no host name", s)
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return "", "", fmt.Errorf("endpoint domain %q: an IP address has no subdomains; give a DNS name", s)
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return "", "", fmt.Errorf("endpoint domain %q: %q is not a DNS label", s, label)
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return "", "", fmt.Errorf("endpoint domain %q: %q is not a DNS label (a-z, 0-9, -)", s, label)
			}
		}
	}
	return host, port, nil
}

// endpointLabel returns the first label of host when host (a request's
// Host, with or without a port) lies under the endpoint domain, and
// whether it does. Such a request is served by the endpoint proxy only.
func (s *Server) endpointLabel(host string) (string, bool) {
	if s.epHost == "" {
		return "", false
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	label, ok := strings.CutSuffix(host, "."+s.epHost)
	return label, ok && label != ""
}

// endpointHostname is the endpoint host of a sandbox's port:
// {port}-{id}.{domain}[:port].
func (s *Server) endpointHostname(id string, port int) string {
	h := fmt.Sprintf("%d-%s.%s", port, id, s.epHost)
	if s.epPort != "" {
		h = net.JoinHostPort(h, s.epPort)
	}
	return h
}

// endpointHostProxy serves a request to an endpoint host: the port and
// sandbox its first label names ({port}-{id}), with the request's path.
// Any other name under the endpoint domain is NOT_FOUND; nothing else of
// the server answers there.
func (s *Server) endpointHostProxy(w http.ResponseWriter, r *http.Request) {
	label, _ := s.endpointLabel(r.Host)
	portStr, id, ok := strings.Cut(label, "-")
	if _, err := parsePort(portStr); !ok || err != nil || id == "" || strings.Contains(id, ".") {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeNotFound, "no sandbox endpoint at %q: endpoint hosts are {port}-{sandboxId}.%s", r.Host, s.epHost))
		return
	}
	r.SetPathValue("id", id)
	r.SetPathValue("port", portStr)
	s.serveProxy(w, r, endpointOrigin)
}

// endpointCookie holds an endpoint token on its endpoint host, so that a
// browser that opened the endpoint with ?astrabox_token= loads the page's
// other resources too. It is host-only, HttpOnly and SameSite=Strict, and
// never forwarded to the box.
const endpointCookie = "astrabox_endpoint_token"

// setEndpointCookie keeps tok (valid, from the query) in the browser for
// the endpoint host until the token expires.
func setEndpointCookie(w http.ResponseWriter, r *http.Request, tok string) {
	expStr, _, _ := strings.Cut(tok, ".")
	exp, _ := strconv.ParseInt(expStr, 10, 64)
	maxAge := int(time.Until(time.Unix(exp, 0)).Seconds())
	if maxAge <= 0 {
		return
	}
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{Name: endpointCookie, Value: tok, Path: "/", MaxAge: maxAge,
		HttpOnly: true, Secure: secure, SameSite: http.SameSiteStrictMode})
}

// withoutCookie removes the cookie name from a Cookie header value,
// leaving the others exactly as they were.
func withoutCookie(header, name string) string {
	parts := strings.Split(header, ";")
	kept := parts[:0]
	for _, p := range parts {
		n, _, _ := strings.Cut(p, "=")
		if strings.TrimSpace(n) != name {
			kept = append(kept, p)
		}
	}
	return strings.TrimSpace(strings.Join(kept, ";"))
}
