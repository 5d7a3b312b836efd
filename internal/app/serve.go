package app

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// serveConfig is the optional --config file (JSON); flags override it.
type serveConfig struct {
	Listen         string                       `json:"listen"`
	DataDir        string                       `json:"dataDir"`
	Database       string                       `json:"database"`
	Backends       []string                     `json:"backends"`
	DefaultBackend string                       `json:"defaultBackend"`
	MaxSandboxes   int                          `json:"maxSandboxes"`
	PublicHost     string                       `json:"publicHost"`
	EndpointDomain string                       `json:"endpointDomain"`
	Profiles       map[string]lifecycle.Profile `json:"profiles"`
	Native         nativeConfig                 `json:"native"`
	Docker         dockerConfig                 `json:"docker"`
	Kubernetes     kubernetesConfig             `json:"kubernetes"` // serve_kubernetes.go
	// OpenSandbox names remote lifecycle services as backends
	// (serve_opensandbox.go).
	OpenSandbox opensandboxConfigs `json:"opensandbox"`
	// Replicas is what several servers on one PostgreSQL database share.
	Replicas replicasConfig `json:"replicas"`
	// Limits bound what one sandbox may ask for (serve_limits.go).
	Limits limitsConfig `json:"limits"`
	// HTTP bounds connections and what answers without a key
	// (serve_http.go).
	HTTP httpConfig `json:"http"`
	// Volumes says where sandboxes' volumes may come from
	// (serve_volumes.go).
	Volumes volumesConfig `json:"volumes"`
	// Shipyard has the extras of the Bay-compatible API (serve_shipyard.go).
	Shipyard shipyardConfig `json:"shipyard"`
	// Egress configures the egress proxy of network limited (serve_egress.go).
	Egress egressConfig `json:"egress"`
	// SessionLimits bound what one agent Session may cost the server
	// (serve_sessions.go).
	SessionLimits sessionLimitsConfig `json:"sessionLimits"`
	// Auth configures sign-in and keys (serve_auth.go).
	Auth authConfig `json:"auth"`
	// ShutdownGrace is the seconds a stopping server (SIGTERM, Ctrl-C)
	// lets replies in progress finish before it hands their Sessions over
	// (default 20; a second signal exits at once).
	ShutdownGrace int `json:"shutdownGrace"`
	// EventRetention is the seconds a deleted sandbox's state events are
	// kept (default 3600).
	EventRetention int `json:"eventRetention"`
}

// replicasConfig is the "replicas" section of the config file.
type replicasConfig struct {
	// ReconcileInterval is the seconds between reconciler passes (default
	// 5); a backend instance's reconciliation lease lasts three of them.
	ReconcileInterval int `json:"reconcileInterval"`
	// SessionLease is the seconds a Session runtime lease lasts (default
	// 10), renewed every third of it.
	SessionLease int `json:"sessionLease"`
}

// nativeConfig and dockerConfig are the "native" and "docker" sections of
// the config file.
type (
	nativeConfig = backends.NativeConfig
	dockerConfig = backends.DockerConfig
)

// decodeConfig reads a config file strictly: an unknown key (a typo, a
// setting of another version) is an error naming it, as is trailing data
// and a value validate refuses.
func decodeConfig(b []byte, cfg *serveConfig) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cfg); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the JSON object")
	}
	return cfg.validate()
}

// validate checks the values of every section, naming the key of the
// first it refuses. Zero values are valid: they select the defaults, which
// the components apply (server.New, the backends' New). Profiles are
// checked by the sandbox service, which also checks stored ones.
func (c *serveConfig) validate() error {
	if c.MaxSandboxes < 0 {
		return errors.New("maxSandboxes must not be negative")
	}
	if c.Replicas.ReconcileInterval < 0 {
		return errors.New("replicas.reconcileInterval must not be negative")
	}
	if c.ShutdownGrace < 0 {
		return errors.New("shutdownGrace must not be negative")
	}
	if c.EventRetention < 0 {
		return errors.New("eventRetention must not be negative")
	}
	if c.Replicas.SessionLease < 0 {
		return errors.New("replicas.sessionLease must not be negative")
	}
	if _, err := c.Limits.limits(); err != nil {
		return err
	}
	if _, err := c.SessionLimits.limits(); err != nil {
		return err
	}
	if err := c.OpenSandbox.validate(); err != nil {
		return err
	}
	if _, err := c.HTTP.limits(); err != nil {
		return err
	}
	if err := c.Auth.validate(); err != nil {
		return err
	}
	if err := c.Shipyard.validate(); err != nil {
		return err
	}
	if err := c.Volumes.validate(); err != nil {
		return err
	}
	if err := c.Egress.validate(); err != nil {
		return err
	}
	if err := c.Kubernetes.Validate("kubernetes"); err != nil {
		return err
	}
	if err := c.Native.Validate("native"); err != nil {
		return err
	}
	if err := c.Docker.Validate("docker"); err != nil {
		return err
	}
	return nil
}

func defaultDataDir(env Env) string {
	if os.Geteuid() == 0 {
		return "/var/lib/astrabox"
	}
	if d := env("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "astrabox")
	}
	return filepath.Join(env("HOME"), ".local", "share", "astrabox")
}

// serveFlags are serve's flags, merged with the config file by
// loadServeConfig; set names those given on the command line, which win
// over the file.
type serveFlags struct {
	configPath, listen, dataDir, database, backends, defaultBackend string
	apiKey, publicHost, endpointDomain, logLevel                    string
	insecure                                                        bool
	maxSandboxes                                                    int
	set                                                             map[string]bool
}

// runServe is `astrabox serve`: it parses the flags, loads the config
// file under them, opens the state and the backends, makes the server and
// serves until ctx is done. Whatever it opened is released on return, in
// reverse order; boxes keep running.
func runServe(ctx context.Context, args []string, stdio IO, env Env) error {
	f, err := parseServeFlags(args, stdio.Stderr, env)
	if err != nil {
		return err
	}
	log, err := newLogger(stdio.Stderr, f.logLevel)
	if err != nil {
		return err
	}
	cfg, err := loadServeConfig(&f, env)
	if err != nil {
		return err
	}
	var done cleanups
	defer done.run()
	state, err := openServeState(ctx, f, cfg, log, &done)
	if err != nil {
		return err
	}
	enabled, order, err := openBackends(f, cfg, state, log, &done)
	if err != nil {
		return err
	}
	if f.defaultBackend == "" {
		f.defaultBackend = order[0]
	}
	scfg, plainKey, err := serverConfig(ctx, f, cfg, env, stdio, state, enabled, log, &done)
	if err != nil {
		return err
	}
	return serve(ctx, f, cfg, scfg, plainKey, order, stdio, log)
}

// parseServeFlags parses serve's command line.
func parseServeFlags(args []string, stderr io.Writer, env Env) (serveFlags, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var f serveFlags
	fs.StringVar(&f.configPath, "config", "", "JSON config file (flags override it)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to serve the API on")
	fs.StringVar(&f.dataDir, "data-dir", defaultDataDir(env), "state directory")
	fs.StringVar(&f.database, "database", "", "SQLite file (default DATA_DIR/astrabox.db) or postgres://... DSN")
	fs.StringVar(&f.backends, "backends", "native", "enabled backends, comma-separated")
	fs.StringVar(&f.defaultBackend, "default-backend", "", "backend of requests that name none (default: the first enabled)")
	fs.StringVar(&f.apiKey, "api-key", "", "API key (default $ASTRABOX_API_KEY, else generated on first start)")
	fs.BoolVar(&f.insecure, "insecure", false, "serve without authentication")
	fs.IntVar(&f.maxSandboxes, "max-sandboxes", 0, "active sandbox quota (0: none)")
	fs.StringVar(&f.publicHost, "public-host", "", "host:port clients reach this server at, for endpoints (default: the request's Host)")
	fs.StringVar(&f.endpointDomain, "endpoint-domain", "", "serve each sandbox port on its own origin, {port}-{id}.DOMAIN[:port] (wildcard DNS to this server); see docs/deployment.md")
	fs.StringVar(&f.logLevel, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	f.set = map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { f.set[fl.Name] = true })
	return f, nil
}

// loadServeConfig reads the config file f names, if any, strictly, with
// its remotes' keys resolved from env, and merges it into f: a value of
// the file replaces a flag's default, a flag given on the command line
// wins. It checks the endpoint domain against the public host.
func loadServeConfig(f *serveFlags, env Env) (serveConfig, error) {
	var cfg serveConfig
	if f.configPath != "" {
		b, err := os.ReadFile(f.configPath)
		if err != nil {
			return cfg, fmt.Errorf("read config: %w", err)
		}
		if err := decodeConfig(b, &cfg); err != nil {
			return cfg, fmt.Errorf("config %s: %w", f.configPath, err)
		}
		if err := cfg.OpenSandbox.resolveKeys(env); err != nil {
			return cfg, fmt.Errorf("config %s: %w", f.configPath, err)
		}
	}
	pick := func(name string, flagVal *string, fileVal string) {
		if !f.set[name] && fileVal != "" {
			*flagVal = fileVal
		}
	}
	pick("listen", &f.listen, cfg.Listen)
	pick("data-dir", &f.dataDir, cfg.DataDir)
	pick("database", &f.database, cfg.Database)
	pick("backends", &f.backends, strings.Join(cfg.Backends, ","))
	pick("default-backend", &f.defaultBackend, cfg.DefaultBackend)
	pick("public-host", &f.publicHost, cfg.PublicHost)
	pick("endpoint-domain", &f.endpointDomain, cfg.EndpointDomain)
	if err := checkEndpointDomain(f.endpointDomain, f.publicHost); err != nil {
		return cfg, err
	}
	if !f.set["max-sandboxes"] && cfg.MaxSandboxes > 0 {
		f.maxSandboxes = cfg.MaxSandboxes
	}
	return cfg, nil
}

// cleanups are release functions, run last first.
type cleanups []func()

func (c *cleanups) add(fn func()) { *c = append(*c, fn) }

func (c cleanups) run() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// serveState is what a server keeps under its data dir (which it holds
// locked: uninstall refuses a data dir a server runs on): the store, the
// images and the egress proxy with its CA.
type serveState struct {
	store  store.Store
	images *image.Store
	egress *egress.Manager
}

// openServeState opens the server's state; done gets what releases it.
func openServeState(ctx context.Context, f serveFlags, cfg serveConfig, log *slog.Logger, done *cleanups) (serveState, error) {
	var s serveState
	if err := os.MkdirAll(f.dataDir, 0o711); err != nil {
		return s, fmt.Errorf("data dir: %w", err)
	}
	// One server per data dir, unless they are replicas on PostgreSQL
	// (each then takes the lock shared).
	replicas := strings.HasPrefix(f.database, "postgres://") || strings.HasPrefix(f.database, "postgresql://")
	unlockDataDir, err := lockDataDir(f.dataDir, !replicas)
	if err != nil {
		if rec, ok := readLocalServer(f.dataDir); ok {
			return s, fmt.Errorf("another astrabox serve (pid %d, %s) uses data dir %s: stop it, give this one its own --data-dir, or run replicas on PostgreSQL (--database postgres://...)", rec.PID, rec.URL, f.dataDir)
		}
		return s, err
	}
	done.add(unlockDataDir)
	if s.store, err = openStore(ctx, f.database, f.dataDir); err != nil {
		return s, err
	}
	done.add(func() { s.store.Close() })
	if s.images, err = image.Open(filepath.Join(f.dataDir, "images"), log.With("component", "images")); err != nil {
		return s, fmt.Errorf("open image store: %w", err)
	}
	if s.egress, err = newEgress(cfg.Egress, f.dataDir, log); err != nil {
		return s, err
	}
	done.add(func() { s.egress.Close() })
	return s, nil
}

// openBackends opens the enabled backends, in the order named; done gets
// what releases them on a clean stop. It refuses an empty list.
func openBackends(f serveFlags, cfg serveConfig, state serveState, log *slog.Logger, done *cleanups) (map[string]sandbox.Provider, []string, error) {
	enabled := map[string]sandbox.Provider{}
	var order []string
	for _, name := range strings.Split(f.backends, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		p, err := newBackend(name, f.dataDir, state.images, cfg, state.egress, log)
		if err != nil {
			return nil, nil, err
		}
		enabled[name] = p
		order = append(order, name)
		// A clean stop releases what no box needs; boxes keep running.
		done.add(func() {
			if err := backends.Release(p); err != nil {
				log.Warn("release backend", "backend", name, "err", err)
			}
		})
	}
	if len(order) == 0 {
		return nil, nil, errors.New("no backend enabled (--backends)")
	}
	return enabled, order, nil
}

// serverConfig is the server's configuration from the flags, the file,
// the state and the backends: the master key, the limits, the notifier of
// a PostgreSQL store (done gets its close) and the API key. It also
// returns the plain API key when it is known (given, not generated).
func serverConfig(ctx context.Context, f serveFlags, cfg serveConfig, env Env, stdio IO, state serveState,
	enabled map[string]sandbox.Provider, log *slog.Logger, done *cleanups) (server.Config, string, error) {
	ring, err := vault.LoadOrCreate(filepath.Join(f.dataDir, "master.key"))
	if err != nil {
		return server.Config{}, "", err
	}
	limits, err := cfg.Limits.serverLimits(f.dataDir)
	if err != nil {
		return server.Config{}, "", err
	}
	httpLimits, err := cfg.HTTP.limits()
	if err != nil {
		return server.Config{}, "", err
	}
	sessionLimits, err := cfg.SessionLimits.limits()
	if err != nil {
		return server.Config{}, "", err
	}
	scfg := server.Config{Store: state.store, Backends: enabled, Installed: cfg.installed(), DefaultBackend: f.defaultBackend,
		Profiles: cfg.Profiles, MaxSandboxes: f.maxSandboxes, Limits: limits, HTTP: httpLimits,
		MetricsRequireKey: cfg.HTTP.MetricsRequireKey, Insecure: f.insecure, PublicHost: f.publicHost, EndpointDomain: f.endpointDomain,
		Vault: ring, Egress: state.egress, Logger: log, ReconcileInterval: time.Duration(cfg.Replicas.ReconcileInterval) * time.Second,
		LeaseTTL: time.Duration(cfg.Replicas.SessionLease) * time.Second, SessionLimits: sessionLimits,
		ShutdownGrace: time.Duration(cfg.ShutdownGrace) * time.Second, EventRetention: time.Duration(cfg.EventRetention) * time.Second}
	if pg, ok := state.store.(*postgres.Store); ok {
		n, err := pg.Notifier(ctx, log.With("component", "notifier"))
		if err != nil {
			return server.Config{}, "", fmt.Errorf("listen for notifications: %w", err)
		}
		done.add(func() { n.Close() })
		scfg.Notifier = n
	}
	if f.insecure {
		log.Warn("serving WITHOUT authentication (--insecure): anyone who reaches the listen address controls every sandbox")
	}
	var plainKey string // for serveShipyard's credentials file, when known
	if !f.insecure {
		plainKey = cmp.Or(f.apiKey, env("ASTRABOX_API_KEY"))
		hash, where, err := apiKeyHash(plainKey, f.dataDir)
		if err != nil {
			return server.Config{}, "", err
		}
		scfg.APIKeyHash = hash
		if where != "" {
			fmt.Fprintf(stdio.Stderr, "API key: in %s (send it as the %s header)\n", where, api.HeaderAPIKey)
		}
	}
	// Replicas share the master key file, and so the key that signs
	// endpoint tokens: a token from one is valid at every other.
	scfg.SigningKey = ring.Derive("proxy-signing")
	if scfg.Web, err = cfg.Auth.web(cmp.Or(f.publicHost, f.listen), env); err != nil {
		return server.Config{}, "", err
	}
	if scfg.Web != nil {
		// The flow cookie of a sign-in started at one replica is read at
		// the one the provider sends the browser back to.
		scfg.Web.FlowKey = ring.Derive("sign-in-flow")
		scfg.Web.Logger = log.With("component", "sign-in")
	}
	if scfg.Gateway, err = cfg.Auth.gateway(env); err != nil {
		return server.Config{}, "", err
	}
	scfg.MaxKeyLifetime = time.Duration(cfg.Auth.MaxKeyLifetime) * time.Second
	return scfg, plainKey, nil
}

// serve listens, makes the server of scfg and serves until ctx is done or
// serving fails; then it drains: unready first, replies in progress let
// finish (up to shutdownGrace, saying each second what it waits for), the
// Sessions this replica holds handed to the others at once, then the
// requests in flight let finish (streams after a second, the rest up to
// 10 seconds). A second signal exits at once.
func serve(ctx context.Context, f serveFlags, cfg serveConfig, scfg server.Config, plainKey string, order []string, stdio IO, log *slog.Logger) error {
	l, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	forget, err := recordLocalServer(f.dataDir, l.Addr().String())
	if err != nil {
		l.Close()
		return err
	}
	defer forget()
	scfg.Holder = "http://" + l.Addr().String()
	if f.publicHost != "" {
		scfg.Holder = "http://" + f.publicHost
	}
	srv, err := server.New(scfg)
	if err != nil {
		l.Close()
		return err
	}
	hs := srv.HTTPServer()
	// Streams (followers, ai-streams) last until their clients leave; at
	// the stop they are ended (their clients resume elsewhere or after the
	// restart), so they do not hold the stop for Shutdown's whole wait.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	hs.BaseContext = func(net.Listener) context.Context { return streams }
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(srv.Listener(l)) }()
	if err := srv.Start(ctx); err != nil {
		log.Warn("start", "err", err)
	}
	defer srv.Close()
	stopShipyard, err := serveShipyard(cfg.Shipyard, srv.Handler, l.Addr().String(), plainKey, f.dataDir, log)
	if err != nil {
		log.Warn("shipyard", "err", err)
	}
	defer stopShipyard()
	fmt.Fprintf(stdio.Stderr, "AstraBox serving on http://%s (backends: %s; data: %s)\n", l.Addr(), strings.Join(order, ","), f.dataDir)
	log.Info("serving", "addr", l.Addr().String(), "backends", strings.Join(order, ","), "default_backend", f.defaultBackend)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	exitOnSecondSignal(log)
	stopping := time.Now()
	log.Info("stopping: no new work taken; replies in progress finish first (a second signal exits at once)")
	srv.Handler.SetDraining()
	srv.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() { // requests in flight get a second, then streams end
		select {
		case <-time.After(time.Second):
			endStreams()
		case <-shutdownCtx.Done():
		}
	}()
	_ = hs.Shutdown(shutdownCtx)
	log.Info("stopped; sandboxes keep running and are re-attached at the next start", "took", time.Since(stopping).Round(time.Millisecond))
	return nil
}

// exitOnSecondSignal exits the process at once on the next SIGINT or
// SIGTERM: a person who asked twice does not wait for the graceful stop.
// What it skips is safe to skip: sandboxes keep running, and the leases
// of this replica's Sessions lapse and are taken over.
func exitOnSecondSignal(log *slog.Logger) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		log.Warn("second signal: exiting now, without waiting for replies in progress", "signal", sig.String())
		os.Exit(130)
	}()
}

func openStore(ctx context.Context, database, dataDir string) (store.Store, error) {
	if strings.HasPrefix(database, "postgres://") || strings.HasPrefix(database, "postgresql://") {
		s, err := postgres.Open(ctx, database)
		if err != nil {
			return nil, fmt.Errorf("open PostgreSQL: %w", err)
		}
		return s, nil
	}
	if database == "" {
		database = filepath.Join(dataDir, "astrabox.db")
	}
	s, err := sqlite.Open(ctx, database)
	if err != nil {
		return nil, fmt.Errorf("open SQLite: %w", err)
	}
	return s, nil
}

// newBackend opens the named backend of cfg (validated already) with its
// state under dataDir; images and eg, when not nil, serve the native
// backend's images and snapshots and the boxes of network limited.
func newBackend(name, dataDir string, images *image.Store, cfg serveConfig, eg *egress.Manager, log *slog.Logger) (sandbox.Provider, error) {
	return cfg.backendsConfig().Open(name, backends.Env{DataDir: dataDir, Images: images, VolumesDir: cfg.Volumes.Dir,
		HostPathRoots: cfg.Volumes.HostPathRoots, Egress: eg, Logger: log})
}

// apiKeyHash returns the hash of key; with no key it loads the stored hash
// or, on first start, generates a key, stores only its hash, and writes the
// key to DATA_DIR/credentials (mode 0600), whose path it returns.
func apiKeyHash(key, dataDir string) ([32]byte, string, error) {
	if key != "" {
		return api.HashKey(key), "", nil
	}
	hashFile := filepath.Join(dataDir, "api-key.sha256")
	credFile := filepath.Join(dataDir, "credentials")
	if b, err := os.ReadFile(hashFile); err == nil {
		var h [32]byte
		raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
		if err != nil || len(raw) != 32 {
			return h, "", fmt.Errorf("corrupt %s: delete it to generate a new key", hashFile)
		}
		copy(h[:], raw)
		return h, credFile, nil
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	key = "ab_" + hex.EncodeToString(b[:])
	if err := os.WriteFile(credFile, []byte(key+"\n"), 0o600); err != nil {
		return [32]byte{}, "", fmt.Errorf("write credentials: %w", err)
	}
	h := api.HashKey(key)
	if err := os.WriteFile(hashFile, []byte(hex.EncodeToString(h[:])+"\n"), 0o600); err != nil {
		return h, "", fmt.Errorf("write key hash: %w", err)
	}
	return h, credFile, nil
}
