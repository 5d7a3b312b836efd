// Package store defines the durable records of the AstraBox server and the
// Store interface that keeps them. Implementations: store/sqlite (the
// embedded default) and store/postgres (for several replicas); both pass
// store/storetest unchanged.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

var (
	// ErrNotFound is returned when a record does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrConflict is returned by Create for an existing id and by Update
	// when the record changed since it was read (its Version differs).
	ErrConflict = errors.New("store: conflict")
)

// Sandbox is the server's record of one sandbox.
type Sandbox struct {
	ID      string
	Backend string
	Profile string
	State   sandbox.State
	// Reason explains the state (why Failed, what Terminated it).
	Reason string
	Image  string
	// Spec is the JSON of the sandbox.Spec the box was created with.
	Spec []byte
	// Metadata is never nil in a record read from the store.
	Metadata map[string]string
	// Entrypoint as requested, for the API's record.
	Entrypoint []string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	// ExpiresAt is when the box is deleted; nil means never.
	ExpiresAt *time.Time
	// IdleTimeout deletes the box after this long without activity; 0: never.
	IdleTimeout  time.Duration
	LastActiveAt time.Time
	// ProviderState is the backend's opaque re-attach record.
	ProviderState []byte
	// Instance names the backend instance the box lives on (see
	// sandbox.Instancer); "" for a record from before instances were kept.
	Instance string
	// Pool is empty for a user's sandbox. A warm box waiting to be claimed
	// carries the key of its pool (see lifecycle); ClaimPooled empties it.
	Pool string
	// OwnerID is the user (a User's ID) that owns the box, and OrgID that
	// user's organization. The store keeps what it is given, on create and
	// on every update: callers set them ("" is no valid owner of a user's
	// box; a warm pool member gets its owner when it is claimed). Records
	// from before owners were kept read back as owner "admin" (the
	// bootstrap key's user) in org "default".
	OwnerID string
	OrgID   string
	// Version increases with every update; Update compares it.
	Version int64
}

// ListFilter selects sandboxes. Zero fields select everything.
type ListFilter struct {
	States  []sandbox.State
	Backend string
	// Instance selects the records of one backend instance.
	Instance string
	// OwnerID selects one owner's records; "" selects every owner's.
	OwnerID  string
	Metadata map[string]string // every pair must match
	// ExpiresBefore selects boxes whose ExpiresAt is set and before it
	// (strictly).
	ExpiresBefore *time.Time
	// Pool selects the members of one warm pool. When empty, AllPools
	// selects every record and otherwise only users' sandboxes (Pool "")
	// are selected.
	Pool     string
	AllPools bool
	// Page is 1-based (below 1 means 1); PageSize 0 (or less) means all.
	Page, PageSize int
}

// Event is a state transition of a sandbox.
type Event struct {
	Seq       int64 // per store, increasing
	SandboxID string
	State     sandbox.State
	Reason    string
	At        time.Time
}

// Idempotency is the remembered answer to a request made with an
// Idempotency-Key.
type Idempotency struct {
	Key         string // the client's key, scoped by the caller (e.g. "create:"+key)
	RequestHash string // hash of the request body; a different body is refused
	Status      int
	Body        []byte
	CreatedAt   time.Time
	// Holder names the process that reserved the key (Status 0), for the
	// caller to tell whether it still lives; opaque here.
	Holder string
}

// Profile is a named RuntimeProfile, stored as JSON.
type Profile struct {
	Name      string
	JSON      []byte
	UpdatedAt time.Time
	// Version is 1 when the profile is first stored and increases with
	// every put.
	Version int64
}

// Sandboxes keeps sandbox records.
type Sandboxes interface {
	// CreateSandbox inserts s (Version is set to 1; a zero CreatedAt is set
	// to now and a zero UpdatedAt to CreatedAt, both written back into s);
	// ErrConflict if the id exists.
	CreateSandbox(ctx context.Context, s *Sandbox) error
	// GetSandbox returns the record or ErrNotFound.
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	// UpdateSandbox replaces the record if its stored Version equals
	// s.Version, then increments s.Version; ErrConflict otherwise,
	// ErrNotFound if it is gone.
	UpdateSandbox(ctx context.Context, s *Sandbox) error
	// DeleteSandbox removes the record; ErrNotFound if absent. The
	// sandbox's events are kept.
	DeleteSandbox(ctx context.Context, id string) error
	// ListSandboxes returns matching records ordered by CreatedAt then ID,
	// and the total number matching (before paging).
	ListSandboxes(ctx context.Context, f ListFilter) ([]*Sandbox, int, error)
	// CountActive counts users' boxes (Pool "") of backend ("" = all) that
	// are not Terminated or Failed.
	CountActive(ctx context.Context, backend string) (int, error)
	// ClaimPooled takes the oldest Running member of pool out of it: its
	// Pool becomes "" and its Version increases, atomically, so that of
	// concurrent claims each gets a different box. It returns the claimed
	// record, or ErrNotFound when the pool has no Running member. The
	// record keeps the member's OwnerID and OrgID: the claimer makes the
	// box its user's with UpdateSandbox.
	ClaimPooled(ctx context.Context, pool string) (*Sandbox, error)
}

// Events keeps sandbox state transitions.
type Events interface {
	// AppendEvent stores e (a zero At is set to now) and returns its Seq.
	// Events are kept apart from sandbox records: the sandbox need not
	// exist. A sandbox's events become visible in Seq order, so a reader
	// that has seen Seq n never later finds a new one below n and can
	// resume with afterSeq n.
	AppendEvent(ctx context.Context, e Event) (int64, error)
	// Events returns the events of a sandbox with Seq > afterSeq, in order
	// (none, and no error, for an unknown sandbox).
	Events(ctx context.Context, sandboxID string, afterSeq int64) ([]Event, error)
}

// Idempotencies keeps the answers to requests made with an Idempotency-Key.
type Idempotencies interface {
	// PutIdempotency stores rec unless its Key exists (a zero CreatedAt is
	// set to now); it returns the stored record and whether it was already
	// there. Of concurrent puts of one Key exactly one stores its record.
	PutIdempotency(ctx context.Context, rec Idempotency) (Idempotency, bool, error)
	// CompleteIdempotency records the answer (Status and Body) of the
	// stored record rec.Key, keeping its CreatedAt; ErrNotFound if it is
	// absent, ErrConflict if its RequestHash differs from rec's. With
	// PutIdempotency it makes the reserve-then-answer pattern: put with
	// Status 0 to reserve the key, run the request, complete (or delete).
	CompleteIdempotency(ctx context.Context, rec Idempotency) error
	// DeleteIdempotency removes the record key (a reservation whose request
	// failed); ErrNotFound if absent.
	DeleteIdempotency(ctx context.Context, key string) error
	// DeleteIdempotencyBefore removes records created before t.
	DeleteIdempotencyBefore(ctx context.Context, t time.Time) error
}

// Profiles keeps RuntimeProfiles.
type Profiles interface {
	// PutProfile stores p (a zero UpdatedAt is set to now) and returns the
	// stored record. With p.Version 0 it creates or replaces; with
	// p.Version > 0 it replaces only the stored record of that version
	// (ErrConflict for another version, ErrNotFound when absent). The
	// stored Version is 1 for a new profile and one more than the replaced
	// record's otherwise.
	PutProfile(ctx context.Context, p Profile) (Profile, error)
	// GetProfile returns ErrNotFound when absent; ListProfiles orders by
	// name; DeleteProfile returns ErrNotFound when absent.
	GetProfile(ctx context.Context, name string) (Profile, error)
	ListProfiles(ctx context.Context) ([]Profile, error)
	DeleteProfile(ctx context.Context, name string) error
}

// Store keeps the server's records: one narrow interface per aggregate.
// Every method is safe for concurrent use and honours ctx (a canceled ctx
// fails the call with an error wrapping ctx.Err()).
//
// Times are kept as given, read back in UTC with microsecond precision (at
// least millisecond is the contract); a zero CreatedAt, UpdatedAt or At that
// a method says it fills is set to the current time. Names and ids order
// byte-wise.
type Store interface {
	Sandboxes
	Events
	Idempotencies
	Profiles
	Agents
	Vaults
	SandboxVaults
	Sessions
	Inputs
	Streams
	NativeStates
	Executions
	Users
	APIKeys
	Audit
	WebSessions
	ResourceOwners

	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	// Close releases the database; later calls return the first result.
	Close() error
}
