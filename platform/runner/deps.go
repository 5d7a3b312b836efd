package runner

import (
	"context"
	"net"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Catalog is what a runner reads of the platform's catalog when it builds
// a Session's runtime (platform.Catalog implements it). Every read is of
// the current record: a Session never pins an Agent or profile version.
type Catalog interface {
	// Agent returns the Agent's record; an error wrapping
	// store.ErrNotFound when there is none.
	Agent(ctx context.Context, id string) (*store.Agent, error)
	// RuntimeProfile returns the named profile with its platform fields;
	// a PROFILE_NOT_FOUND error when there is none.
	RuntimeProfile(ctx context.Context, name string) (lifecycle.Profile, error)
	// Engine returns the installed adapter of kind; an error when none is.
	Engine(kind string) (engine.Adapter, error)
	// ModelKey returns the profile's model API key, opened ("" when the
	// profile has none).
	ModelKey(p lifecycle.Profile) (string, error)
	// OpenVaults returns the secrets of the vaults ids, opened, for
	// protected delivery; errors never carry a secret's value.
	OpenVaults(ctx context.Context, ids []string) ([]egress.Secret, error)
}

// Store is the part of the store a runner uses: Sessions' records, their
// inputs, their log streams with the leases that fence them, and their
// programs' native state.
type Store interface {
	store.Sessions
	store.Inputs
	store.Streams
	store.NativeStates
}

// Sandboxes is the part of the sandbox service (lifecycle.Service) a
// runner uses to make, find, reach and delete a Session's sandbox.
type Sandboxes interface {
	// Backends returns the enabled providers by name.
	Backends() map[string]sandbox.Provider
	// DefaultBackend names the backend of a request that names none.
	DefaultBackend() string
	Create(ctx context.Context, req lifecycle.CreateRequest) (*store.Sandbox, error)
	// Get returns the sandbox's record; SANDBOX_NOT_FOUND when it is gone.
	Get(ctx context.Context, id string) (*store.Sandbox, error)
	// Delete deletes the sandbox; SANDBOX_NOT_FOUND when it is gone.
	Delete(ctx context.Context, id, reason string) error
	// Dial connects to the box's execd; AccessToken is the token execd
	// wants.
	Dial(ctx context.Context, rec *store.Sandbox) (net.Conn, error)
	AccessToken(ctx context.Context, rec *store.Sandbox) (string, error)
}

// Log is the durable log a runner records Sessions' output on.
type Log interface {
	// Append appends entries to stream, fenced by epoch (see
	// store.Streams.Append), wakes the stream's followers and returns the
	// entries with their seqs.
	Append(ctx context.Context, stream string, epoch int64, entries ...store.LogEntry) ([]store.LogEntry, error)
}

// Notifier carries the wake-ups between replicas (store/streamlog's
// notifiers implement it): a Session's holder hears new work on
// platform.WakeStream, and every replica hears a graceful shutdown.
// Notifications carry no data and may be lost or merged.
type Notifier interface {
	Notify(stream string)
	// Subscribe returns a channel that receives a value after each Notify
	// of stream (at most one pending) and a cancel func that must be
	// called to release it.
	Subscribe(stream string) (<-chan struct{}, func())
}
