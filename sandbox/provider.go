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
	// StateBlob is the provider's versioned, opaque re-attach record of
	// the box (its format: see Attacher). The server stores the latest one
	// it sees and hands it back through Attacher.Attach after a restart.
	// It may hold the access token.
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

// Attacher is implemented by providers that can re-attach to a box from the
// state blob they returned for it (Info.StateBlob): what a server does after
// a restart, or a replica that takes over another's boxes, before it
// reaches a box it knows only from its own records.
//
// The blob is versioned and opaque: a JSON object whose integer "version"
// member names its format, every other member the backend's own. A backend
// reads every version it has written since the format was introduced and
// refuses the others; a blob may hold the box's access token, so whoever
// stores it keeps it as secret as the token.
type Attacher interface {
	// Attach rebuilds this Provider's handle on box id from blob, the
	// latest Info.StateBlob of id, so that Dial, Inspect, Pause, Resume and
	// Delete work on the box through this Provider, and returns the box's
	// observed Info (a box whose processes died is returned Failed, without
	// an error, for the caller to delete).
	//
	// Attach is idempotent and harmless on a box this Provider already
	// knows. Where the backend still holds its own record of the box, that
	// record wins over blob (which may be older); where the record was
	// lost and the box still runs, blob restores it.
	//
	// Errors: an invalid id is CodeInvalidRequest; a blob this backend
	// cannot read (undecodable, or of a version it does not know) wraps
	// ErrBadStateBlob and changes nothing; a box that has no record and
	// does not run as blob describes (gone, or blob is another box's)
	// wraps ErrNotFound, and List still reports whatever remains of it
	// for the orphan sweep; a box that runs but cannot be reached from
	// this Provider is CodeUnavailable. ctx bounds the call, not the
	// box's life.
	Attach(ctx context.Context, id string, blob []byte) (Info, error)
}

// ImageChecker is implemented by providers that can tell whether an image
// is there to start boxes from, without starting one (what GET
// /api/v1/engines reports per backend).
type ImageChecker interface {
	// HasImage reports whether image name is available to this backend.
	HasImage(ctx context.Context, name string) (bool, error)
}
