// Package api serves AstraBox's HTTP API: the OpenSandbox-compatible
// lifecycle routes (under /v1 and, as OpenSandbox does, at /), the sandbox
// port proxy, health and metrics. It is the HTTP edge of every route set:
// it authenticates, gives each request an id and logs failures, and
// registers the route sets of its sub-packages, the agent platform's
// /api/v1 (platformapi, behind its authentication) and the Shipyard
// facade (shipyard). The helpers they share are in httpx and idempotency.
package api

import (
	"cmp"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/idempotency"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/api/shipyard"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/internal/console"
	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// HeaderAPIKey carries the API key on every lifecycle request.
const HeaderAPIKey = "OPEN-SANDBOX-API-KEY"

// Config configures the API.
type Config struct {
	Service *lifecycle.Service
	Store   store.Store
	// APIKeyHash is the SHA-256 of the API key; empty with Insecure only.
	APIKeyHash [32]byte
	// Insecure serves without authentication (explicit opt-in).
	Insecure bool
	// SigningKey signs proxy tokens handed out with endpoints.
	SigningKey []byte
	// PublicHost is host[:port] clients reach this server at, used in
	// endpoints (default: the request's Host).
	PublicHost string
	// EndpointDomain, when set, gives every port of every sandbox an origin
	// of its own: a request whose Host is {port}-{id}.{EndpointDomain}
	// reaches that port through the proxy and nothing else of the server,
	// and endpoints are handed out there. A DNS name with an optional
	// :port, which handed-out endpoints keep (see ParseEndpointDomain; an
	// invalid one panics: callers check it first). Empty: endpoints are on
	// the shared origin only, confined (see boxorigin.go).
	EndpointDomain string
	// MaxBodyBytes bounds JSON request bodies (default 1 MiB).
	MaxBodyBytes int64
	// MetricsRequireKey answers /metrics only to requests with the API
	// key (by default it is open, for scrapers; see health.go).
	MetricsRequireKey bool
	// BodyReadTimeout bounds reading a request body, except on the sandbox
	// proxy (see deadline.go; 0: no bound).
	BodyReadTimeout time.Duration
	Logger          *slog.Logger
	// OpenAPI is served at /openapi.yaml (default: the embedded document
	// of AstraBox's additions).
	OpenAPI []byte
	// Holder is this replica's advertised URL, as other replicas forward to
	// it (default "local": a server of its own).
	Holder string
	// Catalog and Sessions serve the agent platform's /api/v1 routes
	// (none when either is nil).
	Catalog  *platform.Catalog
	Sessions *platform.Sessions
	// Auth authenticates requests (default: the bootstrap key
	// APIKeyHash, or everyone with Insecure, and the per-user keys of
	// Store).
	Auth *identity.Authenticator
	// Accounts manages users, keys and the audit log (default: over
	// Store, telling Auth of changes).
	Accounts *identity.Accounts
	// Web offers browser sign-in through an OpenID Connect provider
	// (nil: keys only); its FlowKey defaults to SigningKey.
	Web *identityapi.Web
	// Gateway takes identity from an authenticating gateway's headers
	// (nil: none).
	Gateway *identityapi.Gateway
	// Console serves the web console: GET / and everything under
	// console.AssetPrefix (default: the embedded console).
	Console http.Handler
}

// Server is the API's http.Handler.
type Server struct {
	cfg  Config
	auth *identity.Authenticator
	// rules are the routes registered behind authentication (Rules);
	// public the sign-in routes, which authenticate in their own way.
	rules  []Rule
	public []string
	svc    *lifecycle.Service
	cat    *platform.Catalog
	log    *slog.Logger
	mux    *http.ServeMux
	// transport is the proxy's pooled connection to sandboxes.
	transport *http.Transport
	// draining is set when the server is shutting down: /readyz answers
	// 503 so load balancers stop sending it requests.
	draining atomic.Bool
	// epHost and epPort are Config.EndpointDomain parsed; epMux serves
	// its hosts (the proxy only).
	epHost, epPort string
	epMux          *http.ServeMux
	// boot is this process's id, new at every start (/healthz says it);
	// idem runs idempotent requests, its reservations named by it.
	boot string
	idem *idempotency.Keeper
}

// SetDraining marks the server as shutting down (see /readyz).
func (s *Server) SetDraining() { s.draining.Store(true) }

// New returns the API handler.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if len(cfg.SigningKey) == 0 {
		cfg.SigningKey = make([]byte, 32)
		_, _ = rand.Read(cfg.SigningKey)
	}
	if len(cfg.OpenAPI) == 0 {
		cfg.OpenAPI = OpenAPI
	}
	if cfg.Console == nil {
		cfg.Console = console.Handler()
	}
	if cfg.Web != nil && len(cfg.Web.FlowKey) == 0 {
		web := *cfg.Web
		web.FlowKey = cfg.SigningKey
		cfg.Web = &web
	}
	if cfg.Auth == nil {
		cfg.Auth = identity.New(identity.Config{Records: cfg.Store, BootstrapKeyHash: cfg.APIKeyHash,
			Insecure: cfg.Insecure, Logger: cfg.Logger})
	}
	if cfg.Accounts == nil {
		cfg.Accounts = identity.NewAccounts(identity.AccountsConfig{Store: cfg.Store, Auth: cfg.Auth, Logger: cfg.Logger})
	}
	s := &Server{cfg: cfg, auth: cfg.Auth, svc: cfg.Service, cat: cfg.Catalog, log: cfg.Logger, mux: http.NewServeMux()}
	s.boot = rand.Text()[:16]
	s.idem = &idempotency.Keeper{Store: cfg.Store, Log: cfg.Logger, Self: cmp.Or(cfg.Holder, "local") + "#" + s.boot}
	if strings.HasPrefix(cfg.Holder, "http") {
		s.idem.Probe = idempotency.ProbeHealth(&http.Client{Timeout: 2 * time.Second})
	}
	if cfg.EndpointDomain != "" {
		var err error
		if s.epHost, s.epPort, err = ParseEndpointDomain(cfg.EndpointDomain); err != nil {
			panic("api: " + err.Error())
		}
		// A mux of its own cleans paths (redirecting "..") as the API's does.
		s.epMux = http.NewServeMux()
		s.epMux.HandleFunc("/{rest...}", s.endpointHostProxy)
	}
	s.transport = s.newProxyTransport()
	s.routes()
	return s
}

// HashKey returns the SHA-256 of an API key, as Config.APIKeyHash wants.
func HashKey(key string) [32]byte { return sha256.Sum256([]byte(key)) }

func (s *Server) routes() {
	for _, prefix := range []string{"/v1", ""} {
		s.handle("GET "+prefix+"/sandboxes", identity.ScopeRead, s.listSandboxes)
		s.handle("POST "+prefix+"/sandboxes", identity.ScopeWrite, s.createSandbox)
		s.handle("GET "+prefix+"/sandboxes/{id}", identity.ScopeRead, s.getSandbox)
		s.handleRoute(httpx.Route{Pattern: "DELETE " + prefix + "/sandboxes/{id}", Need: "write", Audit: "sandbox.delete", Handler: s.deleteSandbox})
		s.handle("PATCH "+prefix+"/sandboxes/{id}/metadata", identity.ScopeWrite, s.patchMetadata)
		s.handle("POST "+prefix+"/sandboxes/{id}/pause", identity.ScopeWrite, s.pauseSandbox)
		s.handle("POST "+prefix+"/sandboxes/{id}/resume", identity.ScopeWrite, s.resumeSandbox)
		s.handle("POST "+prefix+"/sandboxes/{id}/renew-expiration", identity.ScopeWrite, s.renewSandbox)
		// An endpoint's token opens the box's port through the proxy,
		// which needs write: so does handing one out.
		s.handle("GET "+prefix+"/sandboxes/{id}/endpoints/{port}", identity.ScopeWrite, s.getEndpoint)
		s.handle("GET "+prefix+"/sandboxes/{id}/events", identity.ScopeRead, s.sandboxEvents)
		// The OpenSandbox SDKs report client-side telemetry here; AstraBox
		// accepts and drops it.
		s.handle("POST "+prefix+"/metrics/events", identity.ScopeRead, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
		s.handle("GET "+prefix+"/profiles", identity.ScopeRead, s.listProfiles)
		s.handleRoute(httpx.Route{Pattern: "PUT " + prefix + "/profiles/{name}", Need: "admin", Audit: "profile.put", Handler: s.putProfile})
		s.handle("POST "+prefix+"/sandboxes/{id}/snapshots", identity.ScopeWrite, s.createSnapshot)
		// Snapshots and named volumes are their owners' (lifecycle's
		// owners.go): the routes answer a user's own, an administrator's
		// every one.
		s.handle("GET "+prefix+"/snapshots", identity.ScopeRead, s.listSnapshots)
		s.handle("GET "+prefix+"/snapshots/{sid}", identity.ScopeRead, s.getSnapshot)
		s.handleRoute(httpx.Route{Pattern: "DELETE " + prefix + "/snapshots/{sid}", Need: "write", Audit: "snapshot.delete", Handler: s.deleteSnapshot})
		s.handle("GET "+prefix+"/volumes", identity.ScopeRead, s.listVolumes)
		s.handleRoute(httpx.Route{Pattern: "DELETE " + prefix + "/volumes/{name}", Need: "write", Audit: "volume.delete", Handler: s.deleteVolume})
	}
	s.egressRoutes()
	ids := identityapi.New(identityapi.Config{Accounts: s.cfg.Accounts, Auth: s.auth, Web: s.cfg.Web, MaxBodyBytes: s.cfg.MaxBodyBytes})
	s.handleRoutes(ids.Routes())
	for _, rt := range ids.PublicRoutes() {
		s.public = append(s.public, rt.Pattern)
		s.mux.HandleFunc(rt.Pattern, rt.Handler)
	}
	if s.cat != nil && s.cfg.Sessions != nil {
		s.platformRoutes()
	}
	// The proxy authenticates itself (API key or a signed endpoint token).
	s.mux.HandleFunc("/v1/sandboxes/{id}/proxy/{port}", s.proxy)
	s.mux.HandleFunc("/v1/sandboxes/{id}/proxy/{port}/{rest...}", s.proxy)
	// The Shipyard Neo (Bay) compatible API for Bay's clients (AstrBot):
	// Bay's routes, bearer auth with the same key, Bay's error shape.
	s.mux.Handle("/shipyard/", http.StripPrefix("/shipyard", shipyard.New(shipyard.Config{
		Service: s.svc, Store: s.cfg.Store, Authenticate: s.authenticate, Logger: s.log.With("component", "shipyard"), Audit: s.auditAs})))
	s.mux.HandleFunc("GET /health", s.health)
	s.mux.HandleFunc("GET /healthz", s.health)
	s.mux.HandleFunc("GET /readyz", s.ready)
	s.mux.HandleFunc("GET /metrics", s.metrics)
	s.mux.HandleFunc("GET /openapi.yaml", func(w http.ResponseWriter, r *http.Request) {
		if len(s.cfg.OpenAPI) == 0 {
			httpx.WriteError(w, sandbox.Errorf(sandbox.CodeNotFound, "no OpenAPI document is configured"))
			return
		}
		w.Header().Set("Content-Type", "application/yaml")
		_, _ = w.Write(s.cfg.OpenAPI)
	})
	// The web console: its page at / only, its assets under their prefix.
	s.mux.Handle("GET /{$}", s.cfg.Console)
	s.mux.Handle("GET "+console.AssetPrefix, s.cfg.Console)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeNotFound, "no route for %s %s", r.Method, r.URL.Path))
	})
}

// authorized reports whether r authenticates (any user, any scope).
func (s *Server) authorized(r *http.Request) bool {
	_, err := s.authenticateAs(r, false)
	return err == nil
}

// ServeHTTP adds X-Request-ID to every answer and logs failures. A request
// to a host under Config.EndpointDomain is served by the endpoint proxy
// only (endpointHostProxy), never by an API or console route.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-ID")
	if id == "" || len(id) > 128 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	w.Header().Set("X-Request-ID", id)
	r = r.WithContext(identity.WithRequestID(r.Context(), id))
	httpx.CheckForwarded(r, s.cfg.SigningKey) // a client's claim to be a replica is dropped
	_, onEndpoint := s.endpointLabel(r.Host)
	if !onEndpoint { // a box's streams, as on the proxy's paths (deadline.go)
		s.boundBodyRead(w, r)
	}
	rec := httpx.NewRecorder(w)
	start := time.Now()
	if onEndpoint {
		s.epMux.ServeHTTP(rec, r)
	} else {
		s.mux.ServeHTTP(rec, r)
	}
	if rec.Status() >= 500 {
		// The cause's full text goes to the log only; the client saw its
		// safe message.
		s.log.Warn("request failed", "method", r.Method, "path", r.URL.Path, "status", rec.Status(), "request_id", id,
			"ms", time.Since(start).Milliseconds(), "err", rec.Err())
	}
	if rec.Status() >= 400 {
		apiErrors.Add(1)
	}
	// By the pattern the mux matched (set on r as it routes), never the
	// path: ids stay out of the labels.
	route := r.Pattern
	if route == "" {
		route = "unmatched"
	}
	if onEndpoint {
		route = "endpoint " + route
	}
	metrics.HTTPRequests.Inc(route, strconv.Itoa(rec.Status()))
	metrics.HTTPDuration.Observe(time.Since(start), route)
}

// decode reads one JSON object into v under Config.MaxBodyBytes
// (httpx.Decode).
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return httpx.Decode(w, r, v, s.cfg.MaxBodyBytes)
}

func (s *Server) publicHost(r *http.Request) string {
	if s.cfg.PublicHost != "" {
		return s.cfg.PublicHost
	}
	return r.Host
}
