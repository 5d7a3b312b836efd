package sandbox

import (
	"context"
	"time"
)

// SnapshotInfo describes a snapshot: a point-in-time capture of a box's
// file system (what it wrote over its image), kept by its backend until
// deleted, from which new boxes start (Spec.Image = Image).
//
// Snapshots are the backends' own state (a committed image on docker, an
// image in the image store on native), labelled with what is here; the
// server keeps no record of them beside it, so what exists and what is
// listed never drift apart.
type SnapshotInfo struct {
	ID        string    `json:"id"`
	SandboxID string    `json:"sandboxId"`
	Name      string    `json:"name,omitempty"`
	Backend   string    `json:"backend"`
	CreatedAt time.Time `json:"createdAt"`
	// Image is what a Spec names to start a box from the snapshot, on the
	// same backend.
	Image string `json:"image"`
	// Entrypoint is the source box's, the default of boxes made from it.
	Entrypoint []string `json:"entrypoint,omitempty"`
}

// SnapshotRequest asks for a snapshot of a box.
type SnapshotRequest struct {
	// ID names the snapshot (see ValidateSnapshotID); the caller makes it.
	ID string
	// Name is an optional human-readable name (at most 256 bytes).
	Name string
	// Entrypoint is recorded as the snapshot's (see SnapshotInfo).
	Entrypoint []string
}

// Snapshotter is implemented by providers with Capabilities.Snapshot.
type Snapshotter interface {
	// Snapshot captures the file system of running box id as snapshot
	// req.ID and returns it once it is ready; the box may be paused
	// meanwhile and runs on afterwards. Errors: an unknown box wraps
	// ErrNotFound; a box that is not running is CodeConflict; a box whose
	// file system this backend cannot capture (the native backend's
	// built-in host image) is CodeNotSupported; a snapshot larger than
	// the backend allows is CodePayloadTooLarge. On failure nothing of
	// the snapshot is left. ctx bounds the call.
	Snapshot(ctx context.Context, id string, req SnapshotRequest) (SnapshotInfo, error)
	// ListSnapshots returns every snapshot of the provider.
	ListSnapshots(ctx context.Context) ([]SnapshotInfo, error)
	// DeleteSnapshot removes snapshot sid; CodeNotFound when unknown,
	// CodeConflict while a box runs from it (where the backend cannot
	// remove it under the box).
	DeleteSnapshot(ctx context.Context, sid string) error
}

// ValidateSnapshotID accepts snapshot ids: 1 to 64 lower-case letters,
// digits and '-', starting with a letter or digit.
func ValidateSnapshotID(id string) error {
	ok := len(id) > 0 && len(id) <= 64 && id[0] != '-'
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c == '-' || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')
	}
	if !ok {
		return Errorf(CodeInvalidRequest, "invalid snapshot id %q", id)
	}
	return nil
}
