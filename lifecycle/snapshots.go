package lifecycle

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Snapshots are kept by the backends (sandbox.Snapshotter): a committed
// image on docker, an image of the image store on native. The service
// keeps no record of its own: capture is synchronous (a snapshot that is
// listed is Ready; one that failed left nothing), so there is no state
// beside the backend's to remember, and nothing can drift. A snapshot's
// backend is found by asking each enabled backend that keeps snapshots.
// The store keeps only who owns each snapshot (see owners.go): a user
// sees, deletes and starts boxes from their own, an administrator from
// every one.

// SnapshotFilter selects snapshots; zero fields select everything.
type SnapshotFilter struct {
	SandboxID string
}

// maxSnapshotName bounds a snapshot's name.
const maxSnapshotName = 256

// CreateSnapshot captures running sandbox id as a new snapshot named
// name (optional), owned by owner (with owner.UserID "": the
// administrator's), and returns it, Ready. Errors: SANDBOX_NOT_FOUND;
// CONFLICT unless the sandbox is Running; CAPABILITY_NOT_SUPPORTED where
// its backend keeps no snapshots; the backend's (see sandbox.Snapshotter).
// Whether owner may snapshot the sandbox is the caller's to check.
func (s *Service) CreateSnapshot(ctx context.Context, id, name string, owner Owner) (sandbox.SnapshotInfo, error) {
	if len(name) > maxSnapshotName || strings.ContainsAny(name, "\x00\n\r") {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "snapshot name must be at most %d bytes on one line", maxSnapshotName)
	}
	rec, err := s.Get(ctx, id)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if rec.State != sandbox.StateRunning {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeConflict, "sandbox %s is %s: only a Running sandbox can be snapshotted", id, rec.State)
	}
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is not enabled", rec.Backend)
	}
	sn, ok := p.(sandbox.Snapshotter)
	if !ok || !p.Capabilities().Snapshot {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeCapability, "capability %s is not supported by backend %s", sandbox.CapSnapshot, rec.Backend)
	}
	if err := s.ensureAttached(ctx, rec); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	unlock := s.lock(id)
	defer unlock()
	// The owner is recorded before the capture, so that the snapshot is
	// never listed without it; a failed capture forgets it.
	sid := newSnapshotID()
	if owner.UserID != "" {
		if err := s.cfg.Store.SetOwner(ctx, &store.ResourceOwner{Kind: store.ResourceSnapshot, Backend: rec.Backend, Name: sid,
			OwnerID: owner.UserID, OrgID: owner.OrgID}); err != nil {
			return sandbox.SnapshotInfo{}, fmt.Errorf("record the snapshot's owner: %w", err)
		}
	}
	info, err := sn.Snapshot(ctx, id, sandbox.SnapshotRequest{ID: sid, Name: name, Entrypoint: rec.Entrypoint})
	if err != nil {
		if owner.UserID != "" {
			s.forgetOwner(ctx, store.ResourceSnapshot, rec.Backend, sid)
		}
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot sandbox %s: %w", id, err)
	}
	info.Backend = rec.Backend
	s.log.Info("snapshot created", "sandbox_id", id, "snapshot_id", info.ID, "backend", rec.Backend)
	return info, nil
}

// newSnapshotID returns "snap-" and 16 lower-case alphanumerics.
func newSnapshotID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	var b [16]byte
	_, _ = rand.Read(b[:])
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "snap-" + string(b[:])
}

// ListSnapshots returns the snapshots that as may see (its own; an
// administrator's: all) of every enabled backend that keeps them, matching
// f, oldest first.
func (s *Service) ListSnapshots(ctx context.Context, as Owner, f SnapshotFilter) ([]sandbox.SnapshotInfo, error) {
	visible, err := s.visibleTo(ctx, as, store.ResourceSnapshot)
	if err != nil {
		return nil, err
	}
	out := []sandbox.SnapshotInfo{}
	for _, name := range s.backendNames() {
		sn, ok := s.cfg.Backends[name].(sandbox.Snapshotter)
		if !ok || !s.cfg.Backends[name].Capabilities().Snapshot {
			continue
		}
		list, err := sn.ListSnapshots(ctx)
		if err != nil {
			return nil, fmt.Errorf("list snapshots of %s: %w", name, err)
		}
		for _, info := range list {
			info.Backend = name
			if (f.SandboxID == "" || info.SandboxID == f.SandboxID) && (visible == nil || visible(name, info.ID)) {
				out = append(out, info)
			}
		}
	}
	slices.SortFunc(out, func(a, b sandbox.SnapshotInfo) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// GetSnapshot returns snapshot sid; NOT_FOUND when no backend has it or
// it is another user's and as is no administrator.
func (s *Service) GetSnapshot(ctx context.Context, as Owner, sid string) (sandbox.SnapshotInfo, error) {
	if err := sandbox.ValidateSnapshotID(sid); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	all, err := s.ListSnapshots(ctx, Owner{Admin: true}, SnapshotFilter{})
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	for _, info := range all {
		if info.ID != sid {
			continue
		}
		owner, err := s.ownerOf(ctx, store.ResourceSnapshot, info.Backend, sid)
		if err != nil {
			return sandbox.SnapshotInfo{}, err
		}
		if !as.owns(owner.UserID) {
			break
		}
		return info, nil
	}
	return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeNotFound, "snapshot %q not found", sid)
}

// DeleteSnapshot removes snapshot sid, which as may see (GetSnapshot),
// from its backend, and its owner's record. Sandboxes made from it are not
// affected where the backend allows (else CONFLICT).
func (s *Service) DeleteSnapshot(ctx context.Context, as Owner, sid string) error {
	info, err := s.GetSnapshot(ctx, as, sid)
	if err != nil {
		return err
	}
	if err := s.cfg.Backends[info.Backend].(sandbox.Snapshotter).DeleteSnapshot(ctx, sid); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", sid, err)
	}
	s.forgetOwner(ctx, store.ResourceSnapshot, info.Backend, sid)
	s.log.Info("snapshot deleted", "snapshot_id", sid, "backend", info.Backend)
	return nil
}

// fromSnapshot points a create request naming a snapshot at it: its
// backend, its image, and (unless the request names one) its entrypoint,
// or `tail -f /dev/null` as OpenSandbox defaults it. Errors: NOT_FOUND
// for an unknown snapshot or one the request's owner may not use (another
// user's, unless the owner is an administrator), INVALID_REQUEST_BODY for
// a request that also names an image or another backend.
func (s *Service) fromSnapshot(ctx context.Context, req *CreateRequest) error {
	if req.SnapshotID == "" {
		return nil
	}
	if req.Image != "" {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "give image or snapshotId, not both")
	}
	info, err := s.GetSnapshot(ctx, req.Owner, req.SnapshotID)
	if err != nil {
		return err
	}
	if req.Backend != "" && req.Backend != info.Backend {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "snapshot %s lives on backend %s, not %s", info.ID, info.Backend, req.Backend)
	}
	req.Backend, req.Image = info.Backend, info.Image
	if len(req.Entrypoint) == 0 {
		req.Entrypoint = info.Entrypoint
	}
	if len(req.Entrypoint) == 0 {
		req.Entrypoint = []string{"tail", "-f", "/dev/null"}
	}
	return nil
}
