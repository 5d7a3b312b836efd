// Package lifecycle is the sandbox service: it creates sandboxes on the
// enabled backends, keeps their records in the store, and enforces their
// lifecycle (expiry, idle timeout, orphans) with a reconciler per backend.
// Every decision is taken from the store, so a restarted server carries on.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/streamlog"
	"github.com/astrabox/astrabox/vault"
)

// Config configures a Service.
type Config struct {
	Store store.Store
	// Backends are the enabled providers by name.
	Backends map[string]sandbox.Provider
	// Installed names every backend this build knows, enabled or not, so a
	// request for a disabled one is told so.
	Installed []string
	// DefaultBackend is used when neither request nor profile names one.
	DefaultBackend string
	// Profiles are the configured RuntimeProfiles by name; "default" is
	// the base of every request that names none.
	Profiles map[string]Profile
	// MaxSandboxes bounds active sandboxes (0: no bound); more get 429.
	MaxSandboxes int
	// Limits bound every sandbox's resources and lifetime (see Limits);
	// configured profiles beyond them are refused by New.
	Limits Limits
	// CreateTimeout bounds one backend create (default 2 minutes).
	CreateTimeout time.Duration
	// Logger receives operational logs.
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
	// Holder names this replica in reconciliation leases (its advertised
	// URL; default "local").
	Holder string
	// Egress is the server's egress proxy (nil: none). Sandboxes created
	// with CredentialProxy need it, with a CA: it carries their Credential
	// Vaults (credvault.go).
	Egress *egress.Manager
	// Vault seals the Credential Vaults in the store (nil: sandboxes with
	// CredentialProxy are refused).
	Vault *vault.Ring
	// EventLog is the durable log the Service records and follows sandbox
	// state events on (see EventLog). Across replicas it must be the
	// server's shared log, whose notifier wakes every replica's followers;
	// nil: an in-process log over Store, whose followers other processes
	// do not wake.
	EventLog EventLog
	// EventRetention is how long the state events of a deleted sandbox
	// are kept (GET /v1/sandboxes/{id}/events still answers them) before
	// the reconciler forgets them (default an hour).
	EventRetention time.Duration
}

// Profile is a RuntimeProfile: defaults a create request starts from.
type Profile struct {
	Name      string              `json:"name"`
	Backend   string              `json:"backend,omitempty"`
	Image     string              `json:"image,omitempty"`
	Resources sandbox.Resources   `json:"resources"`
	Network   sandbox.NetworkMode `json:"network,omitempty"`
	// Timeout and IdleTimeout are whole seconds on the wire (see
	// MarshalJSON), like the lifecycle API's timeout.
	Timeout      time.Duration        `json:"-"`
	IdleTimeout  time.Duration        `json:"-"`
	Capabilities []sandbox.Capability `json:"capabilities,omitempty"`
	Env          map[string]string    `json:"env,omitempty"`
	// Entrypoint is the process a box starts with when the request names
	// none.
	Entrypoint []string `json:"entrypoint,omitempty"`
	// Runtime is the OCI runtime of the profile's boxes, for backends that
	// offer a choice (the docker backend: runc, runsc, kata-runtime, ...).
	Runtime string `json:"runtime,omitempty"`
	// PoolSize is how many ready boxes of this profile the server keeps
	// warm; a create that fits them claims one (see poolKey).
	PoolSize int `json:"poolSize,omitempty"`

	// The agent platform's fields (see platform/): which engine kinds may
	// use the profile, the model endpoint their programs call through
	// AstraBox, and whether the workspace persists. The sandbox service
	// stores them and does not interpret them.
	EngineKinds []string       `json:"engine_kinds,omitempty"`
	Model       *ModelEndpoint `json:"model,omitempty"`
	Workspace   *WorkspaceSpec `json:"workspace,omitempty"`
	// SessionLimits bound what each agent Session on the profile may cost
	// the server (nil: the server's defaults; see SessionLimits).
	SessionLimits *SessionLimits `json:"session_limits,omitempty"`
	// Version is the stored record's version (output only on the sandbox
	// view; the platform's PUT may name it to update only that version).
	Version int64 `json:"version,omitempty"`
}

// ModelEndpoint is an OpenAI-compatible model endpoint. APIKey is
// write-only: the platform seals it into SealedKey before the profile is
// stored, and neither is ever shown to clients.
type ModelEndpoint struct {
	BaseURL   string   `json:"base_url"`
	API       string   `json:"api,omitempty"`
	APIKey    string   `json:"api_key,omitempty"`
	SealedKey string   `json:"api_key_sealed,omitempty"`
	Models    []string `json:"models,omitempty"`
	// Retries is how often a model request that failed before its answer
	// began (429, a 5xx, a connection refused or reset) is sent again,
	// with backoff honouring Retry-After; nil: DefaultModelRetries, 0:
	// never, at most MaxModelRetries.
	Retries *int `json:"retries,omitempty"`
}

// The bounds of ModelEndpoint.Retries.
const (
	DefaultModelRetries = 3
	MaxModelRetries     = 10
)

// WorkspaceSpec says whether a profile's /workspace outlives its boxes.
type WorkspaceSpec struct {
	Persistent bool `json:"persistent"`
}

// Service is the sandbox service. It is safe for concurrent use.
type Service struct {
	cfg    Config
	log    *slog.Logger
	now    func() time.Time
	locks  sync.Map // id -> *sync.Mutex: one state change at a time per box
	tokens sync.Map // id -> execd access token
	// attached records the boxes this process's providers know (see
	// ensureAttached).
	attached sync.Map
	// released records the dead boxes whose remains this process removed
	// from their backend while keeping their Failed records (see release).
	released sync.Map
	// instances caches backend name -> instance name (see Instance).
	instances sync.Map
	// holding records, per backend, whether the last pass held the
	// instance's reconciliation lease.
	holding sync.Map
	// interval is the reconcile interval (Reconcile's), for lease TTLs.
	interval atomic.Int64
	kicks    map[string]chan struct{} // backend -> refill its pools now
	pools    poolStats
}

// New checks cfg and returns a Service. Profiles naming an installed but
// disabled backend are logged; requests using them fail with
// SANDBOX_BACKEND_DISABLED.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("lifecycle: a store is required")
	}
	if len(cfg.Backends) == 0 {
		return nil, errors.New("lifecycle: no backend is enabled")
	}
	if _, ok := cfg.Backends[cfg.DefaultBackend]; !ok {
		return nil, fmt.Errorf("lifecycle: default backend %q is not enabled", cfg.DefaultBackend)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.EventLog == nil {
		cfg.EventLog = &streamlog.Log{Store: cfg.Store, Notifier: streamlog.NewLocal()}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Holder == "" {
		cfg.Holder = "local"
	}
	if cfg.CreateTimeout <= 0 {
		cfg.CreateTimeout = 2 * time.Minute
	}
	if cfg.EventRetention <= 0 {
		cfg.EventRetention = time.Hour
	}
	if err := cfg.Limits.Validate(); err != nil {
		return nil, fmt.Errorf("lifecycle: %w", err)
	}
	profiles := make(map[string]Profile, len(cfg.Profiles)+1)
	for name, p := range cfg.Profiles {
		if err := validProfileName(name); err != nil {
			return nil, fmt.Errorf("lifecycle: configured profile: %w", err)
		}
		if p.PoolSize < 0 || p.PoolSize > MaxPoolSize {
			return nil, fmt.Errorf("lifecycle: profile %s: poolSize must be 0 to %d", name, MaxPoolSize)
		}
		if err := cfg.Limits.checkProfile(p); err != nil {
			return nil, fmt.Errorf("lifecycle: profile %s: %w", name, err)
		}
		if p.SessionLimits != nil {
			if err := p.SessionLimits.Validate(); err != nil {
				return nil, fmt.Errorf("lifecycle: profile %s: %w", name, err)
			}
		}
		p.Name = name // the map's key names it
		profiles[name] = p
	}
	cfg.Profiles = profiles
	if _, ok := cfg.Profiles["default"]; !ok {
		cfg.Profiles["default"] = Profile{Name: "default", Backend: cfg.DefaultBackend}
	}
	s := &Service{cfg: cfg, log: cfg.Logger, now: cfg.Now, kicks: map[string]chan struct{}{}}
	for name := range cfg.Backends {
		s.kicks[name] = make(chan struct{}, 1)
	}
	for name, p := range cfg.Profiles {
		if p.Backend != "" {
			if _, ok := cfg.Backends[p.Backend]; !ok {
				s.log.Warn("profile names a backend that is not enabled", "profile", name, "backend", p.Backend)
			}
		}
	}
	return s, nil
}

// stamp is the current time as the stores keep it: UTC, microseconds, so
// that what an API answer says equals what a later read returns.
func (s *Service) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// Store returns the service's store.
func (s *Service) Store() store.Store { return s.cfg.Store }

// Backends returns the enabled backends by name.
func (s *Service) Backends() map[string]sandbox.Provider { return s.cfg.Backends }

// DefaultBackend names the backend of requests and profiles that name
// none.
func (s *Service) DefaultBackend() string { return s.cfg.DefaultBackend }

func (s *Service) lock(id string) func() {
	m, _ := s.locks.LoadOrStore(id, &sync.Mutex{})
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Get returns a sandbox's record.
func (s *Service) Get(ctx context.Context, id string) (*store.Sandbox, error) {
	rec, err := s.cfg.Store.GetSandbox(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, notFound(id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox: %w", err)
	}
	return rec, nil
}

// List returns the records that match f and the total count.
func (s *Service) List(ctx context.Context, f store.ListFilter) ([]*store.Sandbox, int, error) {
	recs, total, err := s.cfg.Store.ListSandboxes(ctx, f)
	if err != nil {
		return nil, 0, fmt.Errorf("list sandboxes: %w", err)
	}
	return recs, total, nil
}

// deleteTimeout bounds one backend delete.
const deleteTimeout = 2 * time.Minute

// Delete stops a sandbox, removes it from its backend and forgets it.
// reason is recorded in its last event ("user_delete", "ttl_expiry", ...).
func (s *Service) Delete(ctx context.Context, id, reason string) error {
	unlock := s.lock(id)
	defer unlock()
	var p sandbox.Provider
	rec, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		var ok bool
		if p, ok = s.cfg.Backends[cur.Backend]; !ok {
			return sandbox.Errorf(sandbox.CodeBackendDisabled, "sandbox %s lives on backend %q, which is not enabled", id, cur.Backend)
		}
		cur.State, cur.Reason = sandbox.StateStopping, reason
		return nil
	})
	if err != nil {
		return err
	}
	// The backend's delete outlives the caller (a dropped request must not
	// leave a half-deleted box) but not forever.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
	defer cancel()
	if err := p.Delete(dctx, id); err != nil {
		failed := "delete_failed: " + sandbox.MessageOf(err)
		if _, uerr := s.update(context.WithoutCancel(ctx), id, func(cur *store.Sandbox) error {
			if cur.State != sandbox.StateStopping {
				return errUnchanged // another writer moved on meanwhile
			}
			cur.State, cur.Reason = sandbox.StateFailed, failed
			return nil
		}); uerr != nil {
			s.log.Warn("record failed delete", "sandbox_id", id, "err", uerr)
		}
		return fmt.Errorf("delete sandbox %s: %w", id, err)
	}
	rec.State = sandbox.StateTerminated
	s.tokens.Delete(id)
	s.attached.Delete(id)
	s.released.Delete(id)
	if spec, err := recordSpec(rec); err == nil && spec.CredentialProxy {
		s.forgetCredentialVault(ctx, id)
	}
	s.emit(ctx, rec)
	if err := s.cfg.Store.DeleteSandbox(context.WithoutCancel(ctx), id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("forget sandbox %s: %w", id, err)
	}
	s.log.Info("sandbox deleted", "sandbox_id", id, "backend", rec.Backend, "reason", reason)
	return nil
}

// Dial connects to the execd of a running sandbox.
func (s *Service) Dial(ctx context.Context, rec *store.Sandbox) (net.Conn, error) {
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return nil, sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is not enabled", rec.Backend)
	}
	if err := s.ensureAttached(ctx, rec); err != nil {
		return nil, err
	}
	return p.Dial(ctx, rec.ID)
}

// AccessToken returns the execd token of a sandbox (cached; from the
// backend after a restart).
func (s *Service) AccessToken(ctx context.Context, rec *store.Sandbox) (string, error) {
	if t, ok := s.tokens.Load(rec.ID); ok {
		return t.(string), nil
	}
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return "", sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is not enabled", rec.Backend)
	}
	if err := s.ensureAttached(ctx, rec); err != nil {
		return "", err
	}
	if t, ok := s.tokens.Load(rec.ID); ok {
		return t.(string), nil
	}
	info, err := p.Inspect(ctx, rec.ID)
	if err != nil {
		return "", fmt.Errorf("inspect sandbox %s: %w", rec.ID, err)
	}
	s.tokens.Store(rec.ID, info.AccessToken)
	return info.AccessToken, nil
}

func (s *Service) backendNames() []string {
	var out []string
	for n := range s.cfg.Backends {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
