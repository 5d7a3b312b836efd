// Package server is the one wiring point of an AstraBox server: from a
// store, enabled backends and settings it builds the sandbox service, the
// agent platform with its runners, and the HTTP API. `astrabox serve`, the
// benchmarks and end-to-end tests all build their server here.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/engine/astrabox"
	"github.com/astrabox/astrabox/platform/engine/pi"
	"github.com/astrabox/astrabox/platform/runner"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/streamlog"
	"github.com/astrabox/astrabox/vault"
)

// Config is what a server is built from. Store, Backends and Vault are
// made by the caller and stay the caller's to close.
type Config struct {
	Store store.Store
	// Backends are the enabled providers by name; DefaultBackend names one
	// of them; Installed names every backend the build knows.
	Backends       map[string]sandbox.Provider
	DefaultBackend string
	Installed      []string
	Profiles       map[string]lifecycle.Profile
	MaxSandboxes   int
	// Limits bound every sandbox's resources and lifetime; zero fields
	// default to this host's (HostLimits without a disk bound).
	Limits lifecycle.Limits
	// APIKeyHash authenticates requests unless Insecure.
	APIKeyHash [32]byte
	Insecure   bool
	// MetricsRequireKey answers /metrics only with the API key.
	MetricsRequireKey bool
	// HTTP bounds connections and request reads (see HTTPLimits).
	HTTP       HTTPLimits
	SigningKey []byte
	// Web offers browser sign-in through an OpenID Connect provider (nil:
	// API keys only).
	Web *identityapi.Web
	// Gateway takes identity from an authenticating gateway's headers
	// (nil: none).
	Gateway *identityapi.Gateway
	// MaxKeyLifetime, when positive, bounds the life of every API key made.
	MaxKeyLifetime time.Duration
	PublicHost     string
	// EndpointDomain serves sandbox ports on origins of their own,
	// {port}-{id}.{EndpointDomain} (api.Config.EndpointDomain); New refuses
	// an invalid one.
	EndpointDomain string
	// Holder names this replica in Session leases (its advertised URL).
	Holder string
	Vault  *vault.Ring
	// Engines are the agent programs served (default: the built-in agent).
	Engines engine.Registry
	// ReconcileInterval paces the sandbox reconciler (default 5 s).
	ReconcileInterval time.Duration
	// LeaseTTL is a Session lease's lifetime (default 10 s).
	LeaseTTL time.Duration
	// Notifier wakes log followers (Sessions' logs, sandboxes' state
	// events) and runtime holders; across replicas it must reach them all
	// (PostgreSQL's LISTEN/NOTIFY). Default: in-process.
	Notifier streamlog.Notifier
	// Egress is the egress proxy the backends route network limited
	// through; Sessions whose Agent has vaults get their secrets delivered
	// by it (nil: such Sessions fail to start with
	// PROTECTED_DELIVERY_UNSUPPORTED), and sandboxes created with
	// credentialProxy get their Credential Vaults applied by it (nil: such
	// creates are refused with CAPABILITY_NOT_SUPPORTED).
	Egress *egress.Manager
	// SessionIdleTimeout releases idle runtimes whose profile names none.
	SessionIdleTimeout time.Duration
	// SessionLimits bound each agent Session whose profile sets none
	// (zero fields: runner.DefaultLimits').
	SessionLimits lifecycle.SessionLimits
	// EventRetention is how long a deleted sandbox's state events are
	// kept (default an hour).
	EventRetention time.Duration
	// ShutdownGrace bounds how long Close lets replies in progress finish
	// before it hands their Sessions over (default 20 s).
	ShutdownGrace time.Duration
	Logger        *slog.Logger
}

// Server is a wired AstraBox server.
type Server struct {
	Sandboxes *lifecycle.Service
	// Catalog keeps Agents, RuntimeProfiles' platform fields, vaults and
	// model keys; Sessions is the Session front that drives Runners.
	Catalog  *platform.Catalog
	Sessions *platform.Sessions
	Runners  *runner.Manager
	// Handler serves the whole HTTP API.
	Handler *api.Server

	cfg    Config
	stop   context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once
}

// Engines returns a registry of every engine kind AstraBox ships (the
// default of Config.Engines).
func Engines() engine.Registry {
	return engine.Registry{astrabox.Kind: astrabox.New(), pi.Kind: pi.New()}
}

// New wires a server; Start runs its background work.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil || len(cfg.Backends) == 0 || cfg.Vault == nil {
		return nil, errors.New("server: a store, a backend and a vault are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Engines == nil {
		cfg.Engines = Engines()
	}
	if cfg.Holder == "" {
		cfg.Holder = "local"
	}
	if cfg.EndpointDomain != "" {
		if _, _, err := api.ParseEndpointDomain(cfg.EndpointDomain); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	if cfg.ReconcileInterval <= 0 {
		cfg.ReconcileInterval = 5 * time.Second
	}
	if err := cfg.SessionLimits.Validate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	if cfg.Notifier == nil {
		cfg.Notifier = streamlog.NewLocal()
	}
	// One durable log for Sessions and sandbox state events alike: its
	// notifier wakes their followers on every replica.
	log := &streamlog.Log{Store: cfg.Store, Notifier: cfg.Notifier}
	svc, err := lifecycle.New(lifecycle.Config{Store: cfg.Store, Backends: cfg.Backends, Installed: cfg.Installed,
		DefaultBackend: cfg.DefaultBackend, Profiles: cfg.Profiles, MaxSandboxes: cfg.MaxSandboxes, Logger: cfg.Logger,
		Holder: cfg.Holder, Limits: cfg.Limits.WithDefaults(HostLimits("")), Egress: cfg.Egress, Vault: cfg.Vault,
		EventLog: log, EventRetention: cfg.EventRetention})
	if err != nil {
		return nil, err
	}
	// The catalog first, then the runners that read it, then the Session
	// front that drives them: no part needs one made after it.
	cat, err := platform.NewCatalog(platform.CatalogConfig{Store: cfg.Store, Sandboxes: svc, Engines: cfg.Engines,
		Vault: cfg.Vault, Logger: cfg.Logger.With("component", "platform")})
	if err != nil {
		return nil, err
	}
	runners := runner.New(runner.Config{Catalog: cat, Store: cfg.Store, Sandboxes: svc, Log: log, Notifier: cfg.Notifier,
		Holder: cfg.Holder, LeaseTTL: cfg.LeaseTTL, Egress: cfg.Egress, DrainTimeout: cfg.ShutdownGrace,
		IdleTimeout: cfg.SessionIdleTimeout, Limits: cfg.SessionLimits, Logger: cfg.Logger.With("component", "runner")})
	sessions, err := platform.NewSessions(platform.SessionsConfig{Store: cfg.Store, Catalog: cat, Log: log, Runtimes: runners,
		Logger: cfg.Logger.With("component", "platform")})
	if err != nil {
		return nil, err
	}
	auth := identity.New(identity.Config{Records: cfg.Store, BootstrapKeyHash: cfg.APIKeyHash, Insecure: cfg.Insecure,
		Logger: cfg.Logger.With("component", "identity")})
	accounts := identity.NewAccounts(identity.AccountsConfig{Store: cfg.Store, Auth: auth, MaxKeyLifetime: cfg.MaxKeyLifetime,
		Logger: cfg.Logger.With("component", "identity")})
	handler := api.New(api.Config{Service: svc, Store: cfg.Store, Catalog: cat, Sessions: sessions, Auth: auth, Accounts: accounts, Web: cfg.Web, Gateway: cfg.Gateway,
		Insecure: cfg.Insecure, SigningKey: cfg.SigningKey, PublicHost: cfg.PublicHost, EndpointDomain: cfg.EndpointDomain, Logger: cfg.Logger, Holder: cfg.Holder,
		MetricsRequireKey: cfg.MetricsRequireKey, BodyReadTimeout: cfg.HTTP.withDefaults().BodyReadTimeout})
	return &Server{Sandboxes: svc, Catalog: cat, Sessions: sessions, Runners: runners, Handler: handler, cfg: cfg}, nil
}

// Start runs the reconciler, the idempotency sweeper, and re-attaches the
// runtimes of live Sessions. Close stops them.
func (s *Server) Start(ctx context.Context) error {
	ctx, s.stop = context.WithCancel(ctx)
	if err := identity.EnsureBootstrapUser(ctx, s.cfg.Store); err != nil {
		return err
	}
	s.wg.Go(func() { s.Sandboxes.Reconcile(ctx, s.cfg.ReconcileInterval) })
	s.wg.Go(func() { s.Handler.ForgetIdempotency(ctx, 10*time.Minute) })
	if n, err := s.Sandboxes.RestoreCredentialVaults(ctx); err != nil {
		s.cfg.Logger.Warn("restore the sandboxes' credential vaults", "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("credential vaults handed to the egress proxy", "sandboxes", n)
	}
	if n, err := s.Catalog.ResealModelKeys(ctx); err != nil {
		s.cfg.Logger.Warn("re-seal model keys under the newest master key", "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("model keys re-sealed under the newest master key", "profiles", n)
	}
	if n, err := s.Catalog.ResealVaultSecrets(ctx); err != nil {
		s.cfg.Logger.Warn("re-seal vault secrets under the newest master key", "secrets", n, "err", err)
	} else if n > 0 {
		s.cfg.Logger.Info("vault secrets re-sealed under the newest master key", "secrets", n)
	}
	lease := s.cfg.LeaseTTL
	if lease <= 0 {
		lease = 10 * time.Second
	}
	s.wg.Go(func() { s.Runners.Sweep(ctx, lease) })
	if err := s.Runners.ResumeAll(ctx); err != nil {
		return fmt.Errorf("resume sessions: %w", err)
	}
	return nil
}

// Close stops the background work and the runners; sandboxes and the
// programs in them keep running, and a new server re-attaches to them.
func (s *Server) Close() {
	s.closed.Do(func() {
		s.Runners.Close()
		if s.stop != nil {
			s.stop()
		}
		s.wg.Wait()
	})
}

// HTTPServer returns an http.Server for the handler with AstraBox's
// limits (Config.HTTP): header read and idle timeouts; the body read
// timeout is the handler's, per route (api.Config.BodyReadTimeout). Serve
// it on Listener's wrapping of the listener, which bounds connections.
func (s *Server) HTTPServer() *http.Server {
	h := s.cfg.HTTP.withDefaults()
	return &http.Server{Handler: s.Handler, ReadHeaderTimeout: h.ReadHeaderTimeout, IdleTimeout: h.IdleTimeout, MaxHeaderBytes: 64 << 10}
}

// Listener returns l bounded to Config.HTTP's connection counts, with
// accept errors retried (see LimitListener). Closing it closes l.
func (s *Server) Listener(l net.Listener) net.Listener {
	h := s.cfg.HTTP.withDefaults()
	return LimitListener(l, h.MaxConnections, h.MaxConnectionsPerIP, s.cfg.Logger.With("component", "listener"))
}
