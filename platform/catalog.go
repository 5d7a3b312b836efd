package platform

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/vault"
)

// CatalogStore is the part of the store the Catalog keeps its records in.
type CatalogStore interface {
	store.Agents
	store.Vaults
}

// CatalogConfig configures a Catalog.
type CatalogConfig struct {
	Store CatalogStore
	// Sandboxes keeps the RuntimeProfiles (the platform's fields ride on
	// the sandbox layer's profile records).
	Sandboxes *lifecycle.Service
	// Engines are the installed agent-program adapters.
	Engines engine.Registry
	// Vault seals model keys and vault secrets at rest.
	Vault  *vault.Ring
	Logger *slog.Logger
	// Now returns the current time (default time.Now).
	Now func() time.Time
}

// Catalog is the platform's catalog: Agents, the platform fields of
// RuntimeProfiles, credential vaults with their sealed secrets, model keys
// and the installed engines. It owns these records' validation and
// sealing; it never starts or stops a runtime. Reads are of the current
// record (a Session never pins a version). It is safe for concurrent use.
type Catalog struct {
	cfg CatalogConfig
	st  CatalogStore
	log *slog.Logger
	now func() time.Time
}

// NewCatalog returns a Catalog; Store, Sandboxes and Vault are required.
func NewCatalog(cfg CatalogConfig) (*Catalog, error) {
	if cfg.Store == nil || cfg.Sandboxes == nil || cfg.Vault == nil {
		return nil, errors.New("platform: catalog: store, sandboxes and vault are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Catalog{cfg: cfg, st: cfg.Store, log: cfg.Logger, now: cfg.Now}, nil
}

// Engines returns the installed engine adapters by kind.
func (s *Catalog) Engines() engine.Registry { return s.cfg.Engines }

// Engine returns the installed adapter of kind; an error when none is.
func (s *Catalog) Engine(kind string) (engine.Adapter, error) { return s.cfg.Engines.Get(kind) }

// Agent returns the Agent's stored record; an error wrapping
// store.ErrNotFound when there is none.
func (s *Catalog) Agent(ctx context.Context, id string) (*store.Agent, error) {
	return s.st.GetAgent(ctx, id)
}

func (s *Catalog) stamp() time.Time { return stamp(s.now()) }
