package runner

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/egress"
	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/modelapi"
	"github.com/astrabox/astrabox/sandbox"
)

// maxModelRequest bounds one request body from the box.
const maxModelRequest = 32 << 20

// modelProxy is a box's model path: it serves the in-box end of a tunnel,
// checks the session's placeholder credential and forwards to the
// profile's endpoint with the real key, which never enters the box. The
// key is a protected-delivery secret (package egress) bound to the
// endpoint's host: the box proves it holds the placeholder
// (egress.Secret.Holds) and egress.Inject swaps it for the key, as the
// egress proxy does for vault secrets.
type modelProxy struct {
	secrets []egress.Secret  // one: the model key (Value "" when the profile has none)
	routes  []modelapi.Route // what the box may call: the profile's model API's routes
	base    string
	host    string // base's host name, to which the key may go
	client  *http.Client
	ln      net.Listener
	srv     *http.Server
}

// startModel opens the box's model tunnel and serves it.
func (r *runner) startModel(ctx context.Context, rt *runtime, prof lifecycle.Profile) error {
	if prof.Model == nil || prof.Model.BaseURL == "" {
		return fmt.Errorf("runtime profile %q has no model endpoint", prof.Name)
	}
	key, err := r.m.cfg.Catalog.ModelKey(prof)
	if err != nil {
		return err
	}
	base := strings.TrimRight(prof.Model.BaseURL, "/")
	u, err := url.Parse(base)
	if err != nil {
		return fmt.Errorf("runtime profile %q: model endpoint: %w", prof.Name, err)
	}
	ln, err := openTunnel(ctx, rt)
	if err != nil {
		return fmt.Errorf("open model tunnel: %w", err)
	}
	routes := modelapi.Routes(prof.Model.API)
	mp := &modelProxy{routes: routes, base: base, host: strings.ToLower(u.Hostname()), client: r.m.cfg.ModelClient, ln: ln}
	mp.secrets = []egress.Secret{{Name: "model", Placeholder: rt.rec.Placeholder, Value: key, Host: mp.host, Format: "Bearer {value}"}}
	mp.srv = &http.Server{Handler: mp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = mp.srv.Serve(ln) }()
	rt.model = mp
	return nil
}

func (mp *modelProxy) close() {
	_ = mp.srv.Close()
	_ = mp.ln.Close()
}

func modelError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"astrabox_model_path"}}`, msg)
}

// ServeHTTP forwards one model request: only the routes of the profile's
// model API (modelapi.Routes), with the path forwarded exactly as checked; the
// answer goes back scrubbed of the key, so an endpoint that echoes the
// request cannot hand the box the credential it never holds.
func (mp *modelProxy) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	orig := w // MaxBytesReader's, which closes the connection on a body too large
	rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
	w = rec
	start := time.Now()
	defer func() {
		metrics.ModelRequests.Inc(strconv.Itoa(rec.status))
		metrics.ModelDuration.Observe(time.Since(start))
	}()
	if !mp.secrets[0].Holds(req.Header) {
		modelError(w, http.StatusUnauthorized, "invalid session credential")
		return
	}
	rest, err := modelapi.AllowedPath(req, mp.routes)
	if err != nil {
		modelError(w, http.StatusNotFound, err.Error())
		return
	}
	target := mp.base + rest
	if req.URL.RawQuery != "" {
		target += "?" + req.URL.RawQuery
	}
	out, err := http.NewRequestWithContext(req.Context(), req.Method, target, http.MaxBytesReader(orig, req.Body, maxModelRequest))
	if err != nil {
		modelError(w, http.StatusBadGateway, "bad model request")
		return
	}
	for _, h := range []string{"Content-Type", "Accept", "OpenAI-Beta"} {
		if v := req.Header.Get(h); v != "" {
			out.Header.Set(h, v)
		}
	}
	// An answer is scrubbed as it streams: ask for it uncompressed (a
	// gzip or deflate one is still decoded to be scrubbed).
	out.Header.Set("Accept-Encoding", "identity")
	out.ContentLength = req.ContentLength
	if mp.secrets[0].Value != "" { // else the endpoint takes no key
		out.Header.Set("Authorization", req.Header.Get("Authorization"))
		egress.Inject(out, mp.host, mp.secrets)
	}
	resp, err := mp.client.Do(out)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			modelError(w, http.StatusRequestEntityTooLarge, "model request too large")
			return
		}
		// The error text may name the endpoint; it never holds the key,
		// which travels only in a header.
		modelError(w, http.StatusBadGateway, "model endpoint unreachable")
		return
	}
	defer resp.Body.Close()
	if err := egress.ScrubResponse(resp, mp.secrets); err != nil {
		modelError(w, http.StatusBadGateway, "the model endpoint's answer cannot be checked for the key: "+err.Error())
		return
	}
	for _, h := range []string{"Content-Type", "Content-Encoding", "Cache-Control", "X-Request-Id", "Retry-After"} {
		if v := resp.Header.Get(h); v != "" {
			w.Header().Set(h, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil { // io.EOF included
			return
		}
	}
}

// statusWriter keeps the status of a model answer for the metrics; it
// passes Flush on (answers stream).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (sw *statusWriter) WriteHeader(code int) {
	sw.status = code
	sw.ResponseWriter.WriteHeader(code)
}

func (sw *statusWriter) Flush() {
	if fl, ok := sw.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

func (sw *statusWriter) Unwrap() http.ResponseWriter { return sw.ResponseWriter }

// openTunnel opens the box's model tunnel at rt.rec.ModelListen; an empty
// address picks a free loopback port (retrying ports taken meanwhile) and
// records it. A tunnel just closed on the same address may still be
// winding down, so a conflict there is retried briefly.
func openTunnel(ctx context.Context, rt *runtime) (net.Listener, error) {
	pick := rt.rec.ModelListen == ""
	var last error
	deadline := time.Now().Add(20 * time.Second)
	for attempt := 0; attempt < 20 && time.Now().Before(deadline); attempt++ {
		addr := rt.rec.ModelListen
		if pick {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			addr = l.Addr().String()
			l.Close()
		}
		// The Session's holder owns its box's model path: a tunnel a former
		// holder left (gone, or frozen past its lease) is replaced.
		ln, err := rt.ex.TakeTunnel(ctx, addr)
		if err == nil {
			rt.rec.ModelListen = addr
			return ln, nil
		}
		last = err
		// A picked port may have been taken between the pick and the
		// bind (any error then: try another); a fixed one may still be
		// held by a tunnel winding down (a conflict: wait).
		if !pick && execdclient.CodeOf(err) != sandbox.CodeConflict {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil, last
}
