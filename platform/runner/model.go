package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	retries int    // the profile's model.retries (see modelretry.go)
	// pause is retryPause, or a test's stand-in.
	pause  func(try int, h http.Header, now time.Time) (time.Duration, bool)
	client *http.Client
	ln     net.Listener
	srv    *http.Server
	// notes carries what the endpoint said of a request that failed to
	// the runner, which records it in the Session's log (see wait).
	notes chan modelNote
	log   *slog.Logger
}

// modelNote is a control event of the Session's log about a model
// request: model.retry (a hiccup, tried again) or model.failed (the
// failure the program got).
type modelNote struct {
	typ    string
	fields map[string]any
}

// newModelClient is the default client of the model path: connections
// to an endpoint are kept and reused by every Session's requests (a TLS
// handshake per call would be paid otherwise: the standard transport
// keeps two idle connections per host).
func newModelClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 64
	t.MaxIdleConns = 256
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
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
	retries := lifecycle.DefaultModelRetries
	if prof.Model.Retries != nil {
		retries = *prof.Model.Retries
	}
	mp := &modelProxy{routes: routes, base: base, host: strings.ToLower(u.Hostname()), retries: retries,
		pause: retryPause, client: r.m.cfg.ModelClient, ln: ln, notes: make(chan modelNote, 16), log: r.log}
	mp.secrets = []egress.Secret{{Name: "model", Placeholder: rt.rec.Placeholder, Value: key, Host: mp.host, Format: "Bearer {value}"}}
	mp.srv = &http.Server{Handler: mp, ReadHeaderTimeout: 30 * time.Second}
	go func() { _ = mp.srv.Serve(ln) }()
	rt.model = mp
	return nil
}

// modelNotes is the runtime's model path's notes (none without one).
func (rt *runtime) modelNotes() <-chan modelNote {
	if rt.model == nil {
		return nil
	}
	return rt.model.notes
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
	rec := metrics.NewStatusRecorder(w)
	w = rec
	start := time.Now()
	defer func() {
		metrics.ModelRequests.Inc(strconv.Itoa(rec.Status))
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
	// The body is kept whole: a hiccup sends it again.
	body, err := io.ReadAll(http.MaxBytesReader(orig, req.Body, maxModelRequest))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			modelError(w, http.StatusRequestEntityTooLarge, "model request too large")
			return
		}
		modelError(w, http.StatusBadRequest, "the model request could not be read: "+err.Error())
		return
	}
	resp, err := mp.send(req, target, body)
	if err != nil {
		if req.Context().Err() != nil {
			return // the program left
		}
		// The cause names the endpoint, never the key (it travels only in
		// a header).
		msg := "model endpoint unreachable: " + err.Error()
		mp.note("model.failed", map[string]any{"message": msg})
		modelError(w, http.StatusBadGateway, msg)
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

// send forwards the request with body to target, trying again after a
// hiccup before any answer began (modelretry.go): a connection that
// failed, or a retryable status, up to mp.retries more times. Each retry,
// and an error answer that is final, is noted for the Session's log.
func (mp *modelProxy) send(req *http.Request, target string, body []byte) (*http.Response, error) {
	for try := 1; ; try++ {
		out, err := http.NewRequestWithContext(req.Context(), req.Method, target, bytes.NewReader(body))
		if err != nil {
			return nil, fmt.Errorf("bad model request: %w", err)
		}
		for _, h := range []string{"Content-Type", "Accept", "OpenAI-Beta"} {
			if v := req.Header.Get(h); v != "" {
				out.Header.Set(h, v)
			}
		}
		// An answer is scrubbed as it streams: ask for it uncompressed (a
		// gzip or deflate one is still decoded to be scrubbed).
		out.Header.Set("Accept-Encoding", "identity")
		if mp.secrets[0].Value != "" { // else the endpoint takes no key
			out.Header.Set("Authorization", req.Header.Get("Authorization"))
			egress.Inject(out, mp.host, mp.secrets)
		}
		resp, err := mp.client.Do(out)
		if req.Context().Err() != nil {
			if err == nil {
				resp.Body.Close()
			}
			return nil, req.Context().Err()
		}
		var hdr http.Header
		said := map[string]any{"try": try}
		switch {
		case err != nil:
			said["message"] = err.Error()
		case retryableStatus(resp.StatusCode):
			hdr = resp.Header
			said["status"] = resp.StatusCode
			if v := resp.Header.Get("Retry-After"); v != "" {
				said["retry_after"] = v
			}
		default:
			if resp.StatusCode/100 != 2 {
				mp.note("model.failed", map[string]any{"try": try, "status": resp.StatusCode})
			}
			return resp, nil
		}
		pause, ok := mp.pause(try, hdr, time.Now())
		if try > mp.retries || !ok {
			if err != nil {
				return nil, err
			}
			said["final"] = true
			mp.note("model.failed", said)
			return resp, nil
		}
		if resp != nil {
			said["message"] = mp.errorText(resp)
			resp.Body.Close()
		}
		said["pause_ms"] = pause.Milliseconds()
		mp.note("model.retry", said)
		select {
		case <-req.Context().Done():
			return nil, req.Context().Err()
		case <-time.After(pause):
		}
	}
}

// errorText is the start of an error answer's body, as text without the
// key (what the endpoint said, for the Session's log).
func (mp *modelProxy) errorText(resp *http.Response) string {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	text := strings.ToValidUTF8(strings.TrimSpace(string(b)), "\uFFFD")
	if k := mp.secrets[0].Value; k != "" {
		text = strings.ReplaceAll(text, k, "[redacted]")
	}
	return text
}

// note hands a control event to the runner without waiting: one that
// finds the queue full is logged here instead.
func (mp *modelProxy) note(typ string, fields map[string]any) {
	select {
	case mp.notes <- modelNote{typ: typ, fields: fields}:
	default:
		mp.log.Warn("model request note dropped: the runner is behind", "type", typ, "fields", fields)
	}
}

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
