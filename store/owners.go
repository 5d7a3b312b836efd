package store

import (
	"context"
	"time"
)

// The kinds of named records whose owners ResourceOwners keeps.
const (
	// ResourceSnapshot: a snapshot, named by its id.
	ResourceSnapshot = "snapshot"
	// ResourceVolume: a named volume, named by its name on its backend.
	ResourceVolume = "volume"
)

// ResourceOwner says who owns a named record that a backend keeps (a
// snapshot or a named volume): the backends keep the records themselves,
// the store only their owners. A record that has no ResourceOwner was made
// before owners were kept; it is the administrator's ("admin", org
// "default"), as sandboxes from then are.
type ResourceOwner struct {
	// Kind is ResourceSnapshot or ResourceVolume.
	Kind string
	// Backend is the backend that keeps the record: names are per backend.
	Backend string
	// Name is the snapshot's id or the volume's name.
	Name    string
	OwnerID string
	OrgID   string
	// CreatedAt is when the owner was first recorded.
	CreatedAt time.Time
}

// ResourceOwners keeps the owners of snapshots and named volumes, one per
// (Kind, Backend, Name).
type ResourceOwners interface {
	// SetOwner records o as the owner of (o.Kind, o.Backend, o.Name)
	// unless that record has one (a zero CreatedAt is set to now). It
	// returns nil when o was recorded or the stored owner is o.OwnerID
	// already (the stored record is then written back into o), and
	// ErrConflict when another user owns it. Of concurrent calls for one
	// record exactly one owner is stored.
	SetOwner(ctx context.Context, o *ResourceOwner) error
	// GetOwner returns the owner of (kind, backend, name) or ErrNotFound.
	GetOwner(ctx context.Context, kind, backend, name string) (*ResourceOwner, error)
	// ListOwned returns the records of kind owned by ownerID ("" for every
	// owner's), ordered by Backend then Name.
	ListOwned(ctx context.Context, kind, ownerID string) ([]*ResourceOwner, error)
	// DeleteOwner forgets the owner of (kind, backend, name); ErrNotFound
	// if none is recorded.
	DeleteOwner(ctx context.Context, kind, backend, name string) error
}
