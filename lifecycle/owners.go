package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Owners of snapshots and named volumes. The backends keep both; the store
// keeps who owns each (store.ResourceOwners), by kind, backend and name:
//
//   - a snapshot is its maker's, recorded before it is captured;
//   - a named volume is the first user's whose sandbox names it, recorded
//     before the box that creates it is;
//   - a snapshot or volume without a record was made before owners were
//     kept: it is the administrator's (legacyOwner), as sandboxes from then
//     are.
//
// A user sees, uses and deletes only their own; an administrator (Owner.Admin)
// every one. What a user may not see is answered as missing (NOT_FOUND),
// so that nothing tells them another user's exists.

// legacyOwner owns the snapshots and volumes without an owner's record: the
// bootstrap key's user.
var legacyOwner = Owner{UserID: "admin", OrgID: "default"}

// owns reports whether o may see and act on what ownerID owns.
func (o Owner) owns(ownerID string) bool {
	return o.Admin || (o.UserID != "" && o.UserID == ownerID)
}

// ownerOf returns the owner of (kind, backend, name): the recorded one, or
// legacyOwner when none is.
func (s *Service) ownerOf(ctx context.Context, kind, backend, name string) (Owner, error) {
	o, err := s.cfg.Store.GetOwner(ctx, kind, backend, name)
	if errors.Is(err, store.ErrNotFound) {
		return legacyOwner, nil
	}
	if err != nil {
		return Owner{}, fmt.Errorf("owner of %s %s: %w", kind, name, err)
	}
	return Owner{UserID: o.OwnerID, OrgID: o.OrgID}, nil
}

// visibleTo returns a test of whether as may see the record of kind named
// (backend, name); nil when as sees every one (an administrator).
func (s *Service) visibleTo(ctx context.Context, as Owner, kind string) (func(backend, name string) bool, error) {
	if as.Admin {
		return nil, nil
	}
	recs, err := s.cfg.Store.ListOwned(ctx, kind, "")
	if err != nil {
		return nil, fmt.Errorf("owners of %ss: %w", kind, err)
	}
	owners := make(map[[2]string]string, len(recs))
	for _, r := range recs {
		owners[[2]string{r.Backend, r.Name}] = r.OwnerID
	}
	return func(backend, name string) bool {
		owner, ok := owners[[2]string{backend, name}]
		if !ok {
			owner = legacyOwner.UserID
		}
		return as.owns(owner)
	}, nil
}

// forgetOwner removes the owner's record of a deleted snapshot or volume
// (none is fine: a record from before owners); a failure is logged only,
// the record being gone.
func (s *Service) forgetOwner(ctx context.Context, kind, backend, name string) {
	err := s.cfg.Store.DeleteOwner(context.WithoutCancel(ctx), kind, backend, name)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("forget the owner of a deleted "+kind, "backend", backend, "name", name, "err", err)
	}
}

// claimVolumes checks that owner may mount the named volumes of vols on
// backend, and records owner as the owner of each that has none and does
// not exist yet (the box about to be made creates it). A volume owner may
// not use is NOT_FOUND, as a missing one is. A MustExist volume that does
// not exist is left to the backend, which refuses it.
func (s *Service) claimVolumes(ctx context.Context, backend string, vols []sandbox.Volume, owner Owner) error {
	var existing map[string]bool // the backend's volumes, listed once when needed
	for _, v := range vols {
		if v.Claim == "" {
			continue
		}
		rec, err := s.cfg.Store.GetOwner(ctx, store.ResourceVolume, backend, v.Claim)
		switch {
		case err == nil:
			if !owner.owns(rec.OwnerID) {
				return volumeNotFound(v.Claim)
			}
			continue
		case !errors.Is(err, store.ErrNotFound):
			return fmt.Errorf("owner of volume %s: %w", v.Claim, err)
		}
		if existing == nil {
			existing = map[string]bool{}
			if vp, ok := s.cfg.Backends[backend].(sandbox.Volumer); ok {
				list, err := vp.ListVolumes(ctx)
				if err != nil {
					return fmt.Errorf("list volumes of %s: %w", backend, err)
				}
				for _, have := range list {
					existing[have.Name] = true
				}
			}
		}
		if existing[v.Claim] { // made before owners were kept
			if !owner.owns(legacyOwner.UserID) {
				return volumeNotFound(v.Claim)
			}
			continue
		}
		if v.MustExist || owner.UserID == "" {
			continue
		}
		err = s.cfg.Store.SetOwner(ctx, &store.ResourceOwner{Kind: store.ResourceVolume, Backend: backend, Name: v.Claim,
			OwnerID: owner.UserID, OrgID: owner.OrgID})
		switch {
		case errors.Is(err, store.ErrConflict): // another user's create named it first
			if !owner.Admin {
				return volumeNotFound(v.Claim)
			}
		case err != nil:
			return fmt.Errorf("record the owner of volume %s: %w", v.Claim, err)
		}
	}
	return nil
}

func volumeNotFound(name string) error {
	return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
}
