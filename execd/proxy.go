package execd

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The port proxy: any method on /proxy/{port}/{rest...} is forwarded to
// http://127.0.0.1:{port}/{rest} inside the box, with the query and body
// intact, responses flushed as they are written (server-sent events arrive
// event by event) and WebSocket upgrades passed through. The access token
// is not forwarded.
//
// The request path is forwarded as ServeMux leaves it: a path with "..",
// "." or repeated slashes is redirected to its clean form first.

// proxyDialTimeout bounds connecting to the port.
const proxyDialTimeout = 10 * time.Second

func (s *Server) registerProxy() {
	// Connections are not reused: a loopback connect is cheap, and nothing
	// lingers (idle connections, their goroutines) after a request or Close.
	transport := &http.Transport{
		Proxy:              nil, // never an HTTP proxy from the environment
		DialContext:        (&net.Dialer{Timeout: proxyDialTimeout}).DialContext,
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	h := s.proxyHandler(transport)
	s.mux.Handle("/proxy/{port}", h)
	s.mux.Handle("/proxy/{port}/{rest...}", h)
}

// proxyHandler forwards requests through transport. Errors: an invalid
// port is CodeInvalidRequest (400); an unreachable port is
// CodeUpstreamUnreachable (502).
func (s *Server) proxyHandler(transport http.RoundTripper) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw := r.PathValue("port")
		port, err := strconv.Atoi(raw)
		if err != nil || port < 1 || port > 65535 {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "proxy port must be a number from 1 to 65535, got %q", raw))
			return
		}
		rest := proxyRest(r.URL.EscapedPath(), raw)
		rp := &httputil.ReverseProxy{
			Rewrite: func(pr *httputil.ProxyRequest) {
				u := pr.Out.URL
				u.Scheme, u.Host = "http", net.JoinHostPort("127.0.0.1", raw)
				u.RawPath = rest
				u.Path, _ = url.PathUnescape(rest)
				u.RawQuery = pr.In.URL.RawQuery
				pr.Out.Host = u.Host
				pr.Out.Header.Del(wire.HeaderAccessToken)
				pr.SetXForwarded()
			},
			Transport:     transport,
			FlushInterval: -1,
			ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
				s.proxyError(w, r, port, err)
			},
		}
		rp.ServeHTTP(w, r)
	})
}

// proxyRest is the escaped path after /proxy/{port}, at least "/".
func proxyRest(escaped, port string) string {
	rest := strings.TrimPrefix(escaped, "/proxy/"+port)
	if !strings.HasPrefix(rest, "/") {
		rest = "/" + rest
	}
	return rest
}

// proxyError answers a request that could not be forwarded.
func (s *Server) proxyError(w http.ResponseWriter, r *http.Request, port int, err error) {
	if r.Context().Err() != nil {
		// The client went away; nobody reads an answer.
		return
	}
	s.log.Debug("proxy error", "port", port, "method", r.Method, "path", r.URL.Path, "err", err)
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		writeError(w, sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "nothing is listening on port %d in the sandbox (connection refused)", port))
	case errors.Is(err, context.DeadlineExceeded):
		writeError(w, sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "port %d in the sandbox did not answer in time", port))
	default:
		writeError(w, sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "cannot reach port %d in the sandbox: %v", port, err))
	}
}
