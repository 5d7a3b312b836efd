package sandbox

import (
	"context"
	"net"
	"time"
)

// HealthStatus is the outcome of a backend health probe.
type HealthStatus string

const (
	Healthy    HealthStatus = "healthy"
	Unhealthy  HealthStatus = "unhealthy"
	Undetected HealthStatus = "undetected" // the backend's prerequisites are absent
)

// Health is a probe result with the reason behind it.
type Health struct {
	Status HealthStatus `json:"status"`
	Reason string       `json:"reason,omitempty"`
}

// Info is what a provider observes of one box.
type Info struct {
	ID        string    `json:"id"`
	State     State     `json:"state"`
	Reason    string    `json:"reason,omitempty"` // why the box is Failed or Terminated
	CreatedAt time.Time `json:"createdAt"`
	// AccessToken authenticates calls to the box's execd (X-EXECD-ACCESS-TOKEN).
	AccessToken string `json:"-"`
	// StateBlob is the provider's versioned, opaque re-attach record; the
	// server stores it and hands it back through Attacher after a restart.
	StateBlob []byte `json:"-"`
}

// Provider is a sandbox backend. It owns lifecycle and connectivity only:
// everything that happens inside a box goes through execd.
//
// Every method takes ctx first; ctx bounds the call, not the box's life.
type Provider interface {
	// Name is the backend's configuration name ("native", "docker", ...).
	Name() string
	// Capabilities is static: what this backend offers and enforces.
	Capabilities() Capabilities
	// Health probes the backend's prerequisites.
	Health(ctx context.Context) Health
	// Create starts a box under id. It is idempotent on id: a second call
	// for a live box returns its Info. Everything it makes is labelled with
	// id; on failure it removes what it made before returning.
	Create(ctx context.Context, id string, spec Spec) (Info, error)
	// Delete removes the box and everything it made. It is idempotent and
	// returns only when the box is confirmed gone.
	Delete(ctx context.Context, id string) error
	// Pause freezes every process of the box; ErrUnsupported-wrapped where
	// Capabilities().Pause is false.
	Pause(ctx context.Context, id string) error
	// Resume thaws a paused box.
	Resume(ctx context.Context, id string) error
	// Inspect returns the observed state; ErrNotFound-wrapped when unknown.
	Inspect(ctx context.Context, id string) (Info, error)
	// List returns every box the provider owns, for orphan sweeps.
	List(ctx context.Context) ([]Info, error)
	// Dial opens a connection to the box's execd.
	Dial(ctx context.Context, id string) (net.Conn, error)
}
