package lifecycle

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Named volumes are kept by the backends themselves (a directory per
// volume on native, an engine volume on docker) and are not recorded in
// the store: the backend's state is the one truth about what exists and
// what mounts it, and a record beside it could only drift. So the service
// only forwards to the backends that keep volumes (sandbox.Volumer). The
// store keeps only who owns each volume (see owners.go): a user lists,
// mounts and deletes their own, an administrator every one.

// ListVolumes returns the named volumes that as may see (its own; an
// administrator's: all) of backend ("" for every enabled backend that
// keeps them), by backend then name. An unknown or disabled backend is
// CodeInvalidRequest; one without volumes lists none.
func (s *Service) ListVolumes(ctx context.Context, as Owner, backend string) ([]sandbox.VolumeInfo, error) {
	names, err := s.volumeBackends(backend)
	if err != nil {
		return nil, err
	}
	visible, err := s.visibleTo(ctx, as, store.ResourceVolume)
	if err != nil {
		return nil, err
	}
	out := []sandbox.VolumeInfo{}
	for _, name := range names {
		vols, err := s.cfg.Backends[name].(sandbox.Volumer).ListVolumes(ctx)
		if err != nil {
			return nil, fmt.Errorf("list volumes of %s: %w", name, err)
		}
		for _, v := range vols {
			v.Backend = name
			if visible == nil || visible(name, v.Name) {
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, func(a, b sandbox.VolumeInfo) int {
		return strings.Compare(a.Backend+"\x00"+a.Name, b.Backend+"\x00"+b.Name)
	})
	return out, nil
}

// DeleteVolume removes named volume name, which as may see, from
// backend, or, with backend "", from the one enabled backend where as sees
// it (CodeInvalidRequest when several are), and its owner's record.
// Errors: CodeNotFound (also for another user's volume, unless as is an
// administrator), CodeConflict for a volume a sandbox mounts (see
// sandbox.Volumer).
func (s *Service) DeleteVolume(ctx context.Context, as Owner, backend, name string) error {
	if err := sandbox.ValidateVolumeName(name); err != nil {
		return err
	}
	if backend == "" {
		vols, err := s.ListVolumes(ctx, as, "")
		if err != nil {
			return err
		}
		var have []string
		for _, v := range vols {
			if v.Name == name {
				have = append(have, v.Backend)
			}
		}
		switch len(have) {
		case 0:
			return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
		case 1:
			backend = have[0]
		default:
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "volume %q exists on backends %s: name one", name, strings.Join(have, ", "))
		}
	}
	names, err := s.volumeBackends(backend)
	if err != nil {
		return err
	}
	if len(names) == 0 {
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found (backend %s keeps no volumes)", name, backend)
	}
	owner, err := s.ownerOf(ctx, store.ResourceVolume, backend, name)
	if err != nil {
		return err
	}
	if !as.owns(owner.UserID) {
		return volumeNotFound(name)
	}
	if err := s.cfg.Backends[backend].(sandbox.Volumer).DeleteVolume(ctx, name); err != nil {
		return fmt.Errorf("delete volume %s on %s: %w", name, backend, err)
	}
	s.forgetOwner(ctx, store.ResourceVolume, backend, name)
	s.log.Info("volume deleted", "backend", backend, "volume", name)
	return nil
}

// volumeBackends names the backends to ask about volumes: backend if it
// keeps them, or every enabled one that does.
func (s *Service) volumeBackends(backend string) ([]string, error) {
	if backend != "" {
		p, ok := s.cfg.Backends[backend]
		if !ok {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown or disabled backend %q (enabled: %s)", backend, strings.Join(s.backendNames(), ", "))
		}
		if _, ok := p.(sandbox.Volumer); !ok {
			return nil, nil
		}
		return []string{backend}, nil
	}
	var out []string
	for _, name := range s.backendNames() {
		if _, ok := s.cfg.Backends[name].(sandbox.Volumer); ok {
			out = append(out, name)
		}
	}
	return out, nil
}
