// Package shipyard serves a Shipyard Neo (Bay) compatible HTTP API over
// AstraBox's sandbox service and execd, so that Bay's clients (the
// shipyard-neo-sdk, AstrBot's default shipyard_neo booter) run against
// AstraBox unchanged. It is a facade: a Bay sandbox is an ordinary
// lifecycle sandbox (same id, same record, same expiry and reconciler),
// commands and files go through the box's execd, and only what Bay has and
// AstraBox lacks is added here: the readiness states, Bay's path rules and
// error shape, a python code context with IPython-like display capture, and
// the execution history (kept in the store, so it survives a restart).
//
// The handler serves paths as Bay does (/health, /v1/...); the API server
// mounts it under /shipyard. Every route but /health needs the server's API
// key, sent as "Authorization: Bearer <key>" (or the OpenSandbox header).
package shipyard

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/store"
)

// Config configures a Handler.
type Config struct {
	Service *lifecycle.Service
	Store   store.Store
	// Authenticate returns the caller of a request (the server's
	// authentication: a key in the OpenSandbox header or as a bearer
	// token), or an error when it has none. A caller sees and touches
	// only the sandboxes it owns, unless it is an administrator; reading
	// needs the read scope and everything else write.
	Authenticate func(r *http.Request) (*identity.Principal, error)
	Logger       *slog.Logger
	// MaxBodyBytes bounds JSON bodies (default 1 MiB); file writes, whose
	// content travels in the JSON, may be MaxFileBytes.
	MaxBodyBytes int64
	// MaxFileBytes bounds a file written or read as JSON content (default
	// 64 MiB; upload and download stream and have no bound here).
	MaxFileBytes int64
	// CreateWait is how long a create waits for its box before it answers
	// "starting" (default 5 s; the client then polls).
	CreateWait time.Duration
	// StartWait bounds how long an exec waits for a starting box (default
	// 3 minutes); other routes wait ReadyWait (default 5 s) and then
	// answer session_not_ready.
	StartWait time.Duration
	ReadyWait time.Duration
	// MaxOutputBytes bounds the stdout and the stderr kept of one exec
	// (default 16 MiB each); what is past it is dropped with a note.
	MaxOutputBytes int
	// Audit, when set, records a security-relevant action of r's caller
	// (as the API server's audit log does): it is called after a sandbox
	// is deleted, with "sandbox.delete" and "sandbox:"+id.
	Audit func(r *http.Request, action, target string)
}

// Handler is the facade's http.Handler. It is safe for concurrent use.
type Handler struct {
	cfg   Config
	svc   *lifecycle.Service
	st    store.Store
	log   *slog.Logger
	mux   *http.ServeMux
	boxes sync.Map // sandbox id -> *box
}

// New returns the facade over cfg.Service.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Store == nil {
		cfg.Store = cfg.Service.Store()
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&cfg.CreateWait, 5*time.Second)
	def(&cfg.StartWait, 3*time.Minute)
	def(&cfg.ReadyWait, 5*time.Second)
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = 64 << 20
	}
	if cfg.MaxOutputBytes <= 0 {
		cfg.MaxOutputBytes = 16 << 20
	}
	h := &Handler{cfg: cfg, svc: cfg.Service, st: cfg.Store, log: cfg.Logger, mux: http.NewServeMux()}
	h.routes()
	return h
}

func (h *Handler) routes() {
	h.mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "healthy"})
	})
	const sb = "/v1/sandboxes/{id}"
	for pattern, fn := range map[string]http.HandlerFunc{
		"GET /v1/profiles":                        h.listProfiles,
		"POST /v1/sandboxes":                      h.createSandbox,
		"GET /v1/sandboxes":                       h.listSandboxes,
		"GET " + sb:                               h.getSandbox,
		"DELETE " + sb:                            h.deleteSandbox,
		"POST " + sb + "/extend_ttl":              h.extendTTL,
		"POST " + sb + "/keepalive":               h.keepalive,
		"POST " + sb + "/stop":                    h.stopSandbox,
		"POST " + sb + "/shell/exec":              h.shellExec,
		"POST " + sb + "/python/exec":             h.pythonExec,
		"GET " + sb + "/filesystem/files":         h.readFile,
		"PUT " + sb + "/filesystem/files":         h.writeFile,
		"DELETE " + sb + "/filesystem/files":      h.deleteFile,
		"GET " + sb + "/filesystem/directories":   h.listDir,
		"POST " + sb + "/filesystem/upload":       h.upload,
		"GET " + sb + "/filesystem/download":      h.download,
		"GET " + sb + "/history":                  h.listHistory,
		"GET " + sb + "/history/last":             h.lastHistory,
		"GET " + sb + "/history/{eid}":            h.getHistory,
		"PATCH " + sb + "/history/{eid}":          h.annotateHistory,
		"POST " + sb + "/browser/exec":            h.noBrowser,
		"POST " + sb + "/browser/exec_batch":      h.noBrowser,
		"POST " + sb + "/browser/skills/run":      h.noBrowser,
		"GET /v1/sandboxes/{id}/browser/{any...}": h.noBrowser,
	} {
		h.mux.HandleFunc(pattern, h.authed(fn))
	}
	h.mux.HandleFunc("/", h.authed(func(w http.ResponseWriter, r *http.Request) {
		h.writeError(w, r, newError(http.StatusNotFound, codeNotFound, "no route for "+r.Method+" "+r.URL.Path))
	}))
}

// ServeHTTP serves Bay's routes at the root of r's path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// authed refuses requests without the API key: Bay's clients send it as a
// bearer token; the OpenSandbox header is accepted as well.
func (h *Handler) authed(fn http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var p *identity.Principal
		err := identity.Unauthorized()
		if h.cfg.Authenticate != nil {
			p, err = h.cfg.Authenticate(r)
		}
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="astrabox"`)
			h.writeError(w, r, newError(http.StatusUnauthorized, codeUnauthorized, "missing or invalid bearer token"))
			return
		}
		need := identity.ScopeWrite
		if r.Method == http.MethodGet || r.Method == http.MethodHead {
			need = identity.ScopeRead
		}
		if !p.Can(need) {
			h.writeError(w, r, newError(http.StatusForbidden, codeForbidden, "this request needs the "+string(need)+" permission"))
			return
		}
		fn(w, r.WithContext(identity.WithPrincipal(r.Context(), p)))
	}
}

func (h *Handler) noBrowser(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, capability("browser", "capability browser is not offered by this sandbox's profile"))
}

// readJSON reads a JSON object of at most limit bytes into v. Unknown
// fields are ignored, as Bay does; a wrong type, trailing data or an empty
// body is validation_error.
func readJSON(w http.ResponseWriter, r *http.Request, limit int64, v any) ([]byte, error) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, newError(http.StatusRequestEntityTooLarge, codePayloadTooLarge, "request body is too large")
	}
	if err != nil {
		return nil, validation("read request body: " + err.Error())
	}
	if err := decodeJSON(b, v); err != nil {
		return nil, err
	}
	return b, nil
}

func decodeJSON(b []byte, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(b)))
	if err := dec.Decode(v); err != nil {
		if errors.Is(err, io.EOF) {
			return validation("request body is empty; a JSON object is required")
		}
		return validation("invalid JSON body: " + err.Error())
	}
	if dec.More() {
		return validation("invalid JSON body: trailing data after the object")
	}
	return nil
}

// bg is a context for work that outlives its request (a create the client
// does not wait for), bounded by d.
func bg(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d)
}
