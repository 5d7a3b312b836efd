package opensandbox

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/internal/exactbody"

	"github.com/astrabox/astrabox/api/wire"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// endpoint is how to reach the execd of one remote box.
type endpoint struct {
	base    *url.URL
	headers http.Header
	until   time.Time // refresh before then
}

// endpointSlack is how long before its credential expires an endpoint is
// asked for again; endpointTTL is how long one without an expiry is kept.
const (
	endpointSlack = 30 * time.Second
	endpointTTL   = 10 * time.Minute
)

// Dial implements sandbox.Provider: one end of an in-memory connection
// whose other end this Provider serves with a reverse proxy to the box's
// execd endpoint (see the package doc). The box must be known to the
// remote (ErrNotFound otherwise) and its endpoint must be available; ctx
// bounds finding them, not the connection's life. The caller closes the
// connection.
func (p *Provider) Dial(ctx context.Context, id string) (net.Conn, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	if _, err := p.endpointOf(ctx, id); err != nil {
		return nil, fmt.Errorf("dial %s: %w", id, err)
	}
	return p.proxy.dial(ctx, id)
}

// endpointOf returns the execd endpoint of box id, from the cache while
// its credential lasts.
func (p *Provider) endpointOf(ctx context.Context, id string) (endpoint, error) {
	p.mu.Lock()
	rid, ok := p.remote[id]
	ep, cached := p.endpoints[rid]
	p.mu.Unlock()
	if ok && cached && time.Now().Before(ep.until) {
		return ep, nil
	}
	if !ok {
		sb, err := p.find(ctx, id)
		if err != nil {
			return endpoint{}, err
		}
		rid = sb.ID
	}
	ep, err := p.fetchEndpoint(ctx, rid)
	if errors.Is(err, sandbox.ErrNotFound) {
		p.forget(id) // the remote id may be stale: look the box up again
		sb, ferr := p.find(ctx, id)
		if ferr != nil {
			return endpoint{}, ferr
		}
		rid = sb.ID
		ep, err = p.fetchEndpoint(ctx, rid)
	}
	if err != nil {
		return endpoint{}, err
	}
	p.mu.Lock()
	p.endpoints[rid] = ep
	p.mu.Unlock()
	return ep, nil
}

// fetchEndpoint asks the remote for the execd endpoint of remote box rid,
// in the ways Config.Endpoint allows, first that works.
func (p *Provider) fetchEndpoint(ctx context.Context, rid string) (endpoint, error) {
	var tries []url.Values
	signed := url.Values{"expires": {strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10)}}
	switch p.cfg.Endpoint {
	case EndpointProxy:
		tries = []url.Values{{"use_server_proxy": {"true"}}}
	case EndpointSigned:
		tries = []url.Values{signed}
	case EndpointDirect:
		tries = []url.Values{{}}
	default:
		tries = []url.Values{{"use_server_proxy": {"true"}}, signed, {}}
	}
	var err error
	for _, q := range tries {
		var e wire.Endpoint
		err = p.call(ctx, http.MethodGet, fmt.Sprintf("/sandboxes/%s/endpoints/%d", url.PathEscape(rid), execdwire.DefaultPort), q, nil, nil, &e)
		if err == nil {
			return p.toEndpoint(e)
		}
		if c := sandbox.CodeOf(err); c != sandbox.CodeInvalidRequest && c != sandbox.CodeNotSupported {
			return endpoint{}, err
		}
	}
	return endpoint{}, err
}

// toEndpoint reads the remote's answer. A URL without a scheme takes the
// remote's; the API key goes along only to the remote's own host (its
// server proxy), never to another.
func (p *Provider) toEndpoint(e wire.Endpoint) (endpoint, error) {
	raw := e.Endpoint
	if !strings.Contains(raw, "://") {
		raw = p.base.Scheme + "://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return endpoint{}, sandbox.Errorf(sandbox.CodeUnavailable, "remote %s handed out an unusable execd endpoint %q", p.cfg.Name, e.Endpoint)
	}
	h := http.Header{}
	for k, v := range e.Headers {
		h.Set(k, v)
	}
	if u.Host == p.base.Host && p.cfg.APIKey != "" && h.Get(headerAPIKey) == "" {
		h.Set(headerAPIKey, p.cfg.APIKey)
	}
	until := time.Now().Add(endpointTTL)
	if e.ExpiresAt != nil && e.ExpiresAt.Add(-endpointSlack).Before(until) {
		until = e.ExpiresAt.Add(-endpointSlack)
	}
	return endpoint{base: u, headers: h, until: until}, nil
}

// dropEndpoint forgets the cached endpoint of box id (a credential the
// remote no longer takes).
func (p *Provider) dropEndpoint(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.endpoints, p.remote[id])
}

// pipeProxy serves the far ends of the connections Dial returns.
type pipeProxy struct {
	p     *Provider
	srv   *http.Server
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

// boxConn is the far end of a Dial, which names its box.
type boxConn struct {
	net.Conn
	id string
}

// Context keys: the box id of a connection, the endpoint of a request.
type (
	ctxKey struct{}
	epKey  struct{}
)

func newPipeProxy(p *Provider) *pipeProxy {
	pp := &pipeProxy{p: p, conns: make(chan net.Conn), done: make(chan struct{})}
	rp := &httputil.ReverseProxy{
		Rewrite:        pp.rewrite,
		FlushInterval:  -1, // SSE and output streams pass unbuffered
		Transport:      p.hc.Transport,
		ModifyResponse: pp.modifyResponse,
		ErrorHandler:   pp.errorHandler,
	}
	pp.srv = &http.Server{
		Handler:           pp.authorize(rp),
		ReadHeaderTimeout: time.Minute,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if bc, ok := c.(*boxConn); ok {
				return context.WithValue(ctx, ctxKey{}, bc.id)
			}
			return ctx
		},
		ErrorLog: slog.NewLogLogger(p.log.Handler(), slog.LevelDebug),
	}
	go func() { _ = pp.srv.Serve(pp) }()
	return pp
}

// dial makes a connection for box id and hands its far end to the server.
func (pp *pipeProxy) dial(ctx context.Context, id string) (net.Conn, error) {
	near, far := net.Pipe()
	select {
	case pp.conns <- &boxConn{Conn: far, id: id}:
		return near, nil
	case <-pp.done:
		near.Close()
		far.Close()
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "remote backend %s is closed", pp.p.cfg.Name)
	case <-ctx.Done():
		near.Close()
		far.Close()
		return nil, ctx.Err()
	}
}

// Accept, Close and Addr make pipeProxy the server's net.Listener.
func (pp *pipeProxy) Accept() (net.Conn, error) {
	select {
	case c := <-pp.conns:
		return c, nil
	case <-pp.done:
		return nil, net.ErrClosed
	}
}

func (pp *pipeProxy) Close() error {
	pp.once.Do(func() { close(pp.done) })
	return nil
}

func (pp *pipeProxy) Addr() net.Addr { return pipeAddr{} }

func (pp *pipeProxy) close() error {
	pp.Close()
	return pp.srv.Close()
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "opensandbox-execd" }

// authorize lets through requests that carry the box's access token.
func (pp *pipeProxy) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := r.Context().Value(ctxKey{}).(string)
		got := r.Header.Get(execdwire.HeaderAccessToken)
		if id == "" || subtle.ConstantTimeCompare([]byte(got), []byte(pp.p.token(id))) != 1 {
			writeExecdError(w, http.StatusUnauthorized, sandbox.CodeUnauthorized, "missing or invalid "+execdwire.HeaderAccessToken)
			return
		}
		ep, err := pp.p.endpointOf(r.Context(), id)
		if err != nil {
			writeExecdError(w, http.StatusBadGateway, sandbox.CodeUpstreamUnreachable, sandbox.MessageOf(err))
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), epKey{}, ep)))
	})
}

// rewrite points a request at the box's endpoint with its headers in place
// of the access token.
func (pp *pipeProxy) rewrite(pr *httputil.ProxyRequest) {
	ep, _ := pr.In.Context().Value(epKey{}).(endpoint)
	pr.SetURL(ep.base)
	pr.Out.Body = exactbody.Wrap(pr.Out.Body, pr.Out.ContentLength)
	pr.Out.Header.Del(execdwire.HeaderAccessToken)
	for k, v := range ep.headers {
		pr.Out.Header[k] = v
	}
}

// modifyResponse drops a cached endpoint whose credential the remote
// refused, so the next request asks for a new one.
func (pp *pipeProxy) modifyResponse(resp *http.Response) error {
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		if id, ok := resp.Request.Context().Value(ctxKey{}).(string); ok {
			pp.p.dropEndpoint(id)
		}
	}
	return nil
}

func (pp *pipeProxy) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		return // the caller went away
	}
	pp.p.log.Debug("execd through the remote", "backend", pp.p.cfg.Name, "err", scrub(err))
	writeExecdError(w, http.StatusBadGateway, sandbox.CodeUpstreamUnreachable, "remote "+pp.p.cfg.Name+" is unreachable: "+scrub(err))
}

// writeExecdError answers as execd does: {code, message}.
func writeExecdError(w http.ResponseWriter, status int, code sandbox.Code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"code": string(code), "message": msg})
}
