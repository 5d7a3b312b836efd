package app

import (
	"bytes"
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
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// installedBackends are the backends this build knows.
var installedBackends = []string{"native", "docker", "kubernetes"}

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

// nativeConfig is the "native" section of the config file.
type nativeConfig struct {
	// Network is the IPv4 range, /16 or larger, that boxes with network
	// unrestricted are addressed from (default native.DefaultNetwork). It
	// must not overlap a network the host uses.
	Network string `json:"network"`
	// CgroupParent is the cgroup, relative to the cgroup root, that boxes
	// are created under (default "astrabox-" and a hash of the data dir,
	// so that servers with different data dirs keep apart).
	CgroupParent string `json:"cgroupParent"`
}

// dockerConfig is the "docker" section of the config file.
type dockerConfig struct {
	// Host is the engine ("unix:///var/run/docker.sock", "tcp://..."; by
	// default DOCKER_HOST or the local socket).
	Host string `json:"host"`
	// Runtime is the OCI runtime of boxes (runc, runsc, kata-runtime, ...).
	Runtime string `json:"runtime"`
	// Runtimes are further runtimes profiles may choose ("runtime").
	Runtimes []string `json:"runtimes"`
	// ReadonlyRootfs keeps the image read-only, so the disk limit holds.
	ReadonlyRootfs bool `json:"readonlyRootfs"`
	// NoPull refuses images the engine does not hold.
	NoPull bool `json:"noPull"`
	// AllowRegistries are registries on private, loopback or link-local
	// addresses that pulls may reach ("registry.internal:5000").
	AllowRegistries []string `json:"allowRegistries"`
	// Owner labels everything the backend creates. Replicas sharing an
	// engine set the same owner, so that they serve one backend instance
	// (default: derived from the data dir, a server of its own).
	Owner string `json:"owner"`
}

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
	if err := c.Shipyard.validate(); err != nil {
		return err
	}
	if err := c.Volumes.validate(); err != nil {
		return err
	}
	if err := c.Egress.validate(); err != nil {
		return err
	}
	if err := c.Kubernetes.validate(); err != nil {
		return err
	}
	if n := c.Native.Network; n != "" {
		p, err := netip.ParsePrefix(n)
		if err != nil || !p.Addr().Is4() || p.Bits() > 16 {
			return fmt.Errorf("native.network %q: want an IPv4 range in CIDR notation, /16 or larger", n)
		}
	}
	if g := c.Native.CgroupParent; g != "" && !filepath.IsLocal(strings.TrimPrefix(g, "/")) {
		return fmt.Errorf("native.cgroupParent %q: want a cgroup path within the cgroup root", g)
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

func runServe(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	configPath := fs.String("config", "", "JSON config file (flags override it)")
	listen := fs.String("listen", "127.0.0.1:8080", "address to serve the API on")
	dataDir := fs.String("data-dir", defaultDataDir(env), "state directory")
	database := fs.String("database", "", "SQLite file (default DATA_DIR/astrabox.db) or postgres://... DSN")
	backends := fs.String("backends", "native", "enabled backends, comma-separated")
	defaultBackend := fs.String("default-backend", "", "backend of requests that name none (default: the first enabled)")
	apiKey := fs.String("api-key", "", "API key (default $ASTRABOX_API_KEY, else generated on first start)")
	insecure := fs.Bool("insecure", false, "serve without authentication")
	maxSandboxes := fs.Int("max-sandboxes", 0, "active sandbox quota (0: none)")
	publicHost := fs.String("public-host", "", "host:port clients reach this server at, for endpoints (default: the request's Host)")
	endpointDomain := fs.String("endpoint-domain", "", "serve each sandbox port on its own origin, {port}-{id}.DOMAIN[:port] (wildcard DNS to this server); see docs/deployment.md")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log, err := newLogger(stdio.Stderr, *logLevel)
	if err != nil {
		return err
	}
	var fileCfg serveConfig
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		if err := decodeConfig(b, &fileCfg); err != nil {
			return fmt.Errorf("config %s: %w", *configPath, err)
		}
		if err := fileCfg.OpenSandbox.resolveKeys(env); err != nil {
			return fmt.Errorf("config %s: %w", *configPath, err)
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	pick := func(name, flagVal, fileVal string) string {
		if !set[name] && fileVal != "" {
			return fileVal
		}
		return flagVal
	}
	*listen = pick("listen", *listen, fileCfg.Listen)
	*dataDir = pick("data-dir", *dataDir, fileCfg.DataDir)
	*database = pick("database", *database, fileCfg.Database)
	*backends = pick("backends", *backends, strings.Join(fileCfg.Backends, ","))
	*defaultBackend = pick("default-backend", *defaultBackend, fileCfg.DefaultBackend)
	*publicHost = pick("public-host", *publicHost, fileCfg.PublicHost)
	*endpointDomain = pick("endpoint-domain", *endpointDomain, fileCfg.EndpointDomain)
	if err := checkEndpointDomain(*endpointDomain, *publicHost); err != nil {
		return err
	}
	if !set["max-sandboxes"] && fileCfg.MaxSandboxes > 0 {
		*maxSandboxes = fileCfg.MaxSandboxes
	}

	if err := os.MkdirAll(*dataDir, 0o711); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// Held while serving: uninstall refuses a data dir a server runs on.
	unlockDataDir, err := lockDataDir(*dataDir, false)
	if err != nil {
		return err
	}
	defer unlockDataDir()
	st, err := openStore(ctx, *database, *dataDir)
	if err != nil {
		return err
	}
	defer st.Close()

	images, err := image.Open(filepath.Join(*dataDir, "images"), log.With("component", "images"))
	if err != nil {
		return fmt.Errorf("open image store: %w", err)
	}
	eg, err := newEgress(fileCfg.Egress, *dataDir, log)
	if err != nil {
		return err
	}
	defer eg.Close()
	enabled := map[string]sandbox.Provider{}
	var order []string
	for _, name := range strings.Split(*backends, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		p, err := newBackend(name, *dataDir, images, fileCfg, eg, log)
		if err != nil {
			return err
		}
		enabled[name] = p
		order = append(order, name)
		switch bp := p.(type) {
		case *native.Provider, *docker.Provider:
			// A clean stop releases what no box needs; boxes keep running.
			c := bp.(io.Closer)
			defer func() {
				if err := c.Close(); err != nil {
					log.Warn("release backend", "backend", name, "err", err)
				}
			}()
		}
	}
	if len(order) == 0 {
		return errors.New("no backend enabled (--backends)")
	}
	if *defaultBackend == "" {
		*defaultBackend = order[0]
	}
	ring, err := vault.LoadOrCreate(filepath.Join(*dataDir, "master.key"))
	if err != nil {
		return err
	}
	limits, err := fileCfg.Limits.serverLimits(*dataDir)
	if err != nil {
		return err
	}
	httpLimits, err := fileCfg.HTTP.limits()
	if err != nil {
		return err
	}
	sessionLimits, err := fileCfg.SessionLimits.limits()
	if err != nil {
		return err
	}
	scfg := server.Config{Store: st, Backends: enabled, Installed: fileCfg.installed(), DefaultBackend: *defaultBackend,
		Profiles: fileCfg.Profiles, MaxSandboxes: *maxSandboxes, Limits: limits, HTTP: httpLimits,
		MetricsRequireKey: fileCfg.HTTP.MetricsRequireKey, Insecure: *insecure, PublicHost: *publicHost, EndpointDomain: *endpointDomain,
		Vault: ring, Egress: eg, Logger: log, ReconcileInterval: time.Duration(fileCfg.Replicas.ReconcileInterval) * time.Second,
		LeaseTTL: time.Duration(fileCfg.Replicas.SessionLease) * time.Second, SessionLimits: sessionLimits}
	if pg, ok := st.(*postgres.Store); ok {
		n, err := pg.Notifier(ctx, log.With("component", "notifier"))
		if err != nil {
			return fmt.Errorf("listen for notifications: %w", err)
		}
		defer n.Close()
		scfg.Notifier = n
	}
	if *insecure {
		log.Warn("serving WITHOUT authentication (--insecure): anyone who reaches the listen address controls every sandbox")
	}
	var plainKey string // for serveShipyard's credentials file, when known
	if !*insecure {
		key := *apiKey
		if key == "" {
			key = env("ASTRABOX_API_KEY")
		}
		plainKey = key
		hash, where, err := apiKeyHash(key, *dataDir)
		if err != nil {
			return err
		}
		scfg.APIKeyHash = hash
		if where != "" {
			fmt.Fprintf(stdio.Stderr, "API key: in %s (send it as the %s header)\n", where, api.HeaderAPIKey)
		}
	}
	// Replicas share the master key file, and so the key that signs
	// endpoint tokens: a token from one is valid at every other.
	scfg.SigningKey = ring.Derive("proxy-signing")
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	scfg.Holder = "http://" + l.Addr().String()
	if *publicHost != "" {
		scfg.Holder = "http://" + *publicHost
	}
	srv, err := server.New(scfg)
	if err != nil {
		l.Close()
		return err
	}
	hs := srv.HTTPServer()
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(srv.Listener(l)) }()
	if err := srv.Start(ctx); err != nil {
		log.Warn("start", "err", err)
	}
	defer srv.Close()
	stopShipyard, err := serveShipyard(fileCfg.Shipyard, srv.Handler, l.Addr().String(), plainKey, *dataDir, log)
	if err != nil {
		log.Warn("shipyard", "err", err)
	}
	defer stopShipyard()
	fmt.Fprintf(stdio.Stderr, "AstraBox serving on http://%s (backends: %s; data: %s)\n", l.Addr(), strings.Join(order, ","), *dataDir)
	log.Info("serving", "addr", l.Addr().String(), "backends", strings.Join(order, ","), "default_backend", *defaultBackend)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	}
	// Unready first, then hand the Sessions this replica holds to the
	// others at once, then let the requests in flight finish.
	srv.Handler.SetDraining()
	srv.Close()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = hs.Shutdown(shutdownCtx)
	log.Info("stopped; sandboxes keep running and are re-attached at the next start")
	return nil
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

// newBackend makes the named backend with its state under dataDir and its
// section of cfg (validated already).
func newBackend(name, dataDir string, images *image.Store, cfg serveConfig, eg *egress.Manager, log *slog.Logger) (sandbox.Provider, error) {
	switch name {
	case "native":
		if os.Geteuid() != 0 {
			return nil, errors.New("the native backend needs root (it creates namespaces and cgroups): run as root")
		}
		nc := cfg.Native
		p, err := native.New(native.Config{DataDir: filepath.Join(dataDir, "native"), Network: nc.Network, CgroupParent: nc.CgroupParent,
			Images: images.Resolve, Logger: log.With("backend", "native"),
			VolumesDir: cfg.Volumes.Dir, HostPathRoots: cfg.Volumes.HostPathRoots, Snapshots: nativeSnapshots(images), Egress: eg})
		if err != nil {
			return nil, err
		}
		return p, nil
	case "docker":
		dc := cfg.Docker
		p, err := docker.New(docker.Config{DataDir: filepath.Join(dataDir, "docker"), FromEnv: true, Host: dc.Host,
			Runtime: dc.Runtime, Runtimes: dc.Runtimes, ReadonlyRootfs: dc.ReadonlyRootfs, NoPull: dc.NoPull, Owner: dc.Owner, AllowRegistries: dc.AllowRegistries,
			HostPathRoots: cfg.Volumes.HostPathRoots, Egress: eg, Logger: log.With("backend", "docker")})
		if err != nil {
			return nil, err
		}
		return p, nil
	case "kubernetes":
		return newKubernetesBackend(cfg.Kubernetes, log)
	}
	if oc, ok := cfg.OpenSandbox[name]; ok {
		return newOpenSandboxBackend(name, dataDir, oc, log)
	}
	return nil, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(cfg.installed(), ", "))
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
