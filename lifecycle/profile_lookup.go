package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/astrabox/astrabox/store"
)

// ErrProfileNotFound is wrapped by LookupProfile for an unknown name.
var ErrProfileNotFound = errors.New("profile not found")

// LookupProfile returns the named profile, configured or stored, with its
// stored Version (0 for a configured one); an error wrapping
// ErrProfileNotFound when there is none.
func (s *Service) LookupProfile(ctx context.Context, name string) (Profile, error) {
	if p, ok := s.cfg.Profiles[name]; ok {
		return p, nil
	}
	sp, err := s.cfg.Store.GetProfile(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return Profile{}, fmt.Errorf("profile %q: %w", name, ErrProfileNotFound)
	}
	if err != nil {
		return Profile{}, fmt.Errorf("get profile: %w", err)
	}
	p, err := decodeProfile(name, sp)
	if err != nil {
		return Profile{}, err
	}
	return p, nil
}

// IsConfiguredProfile reports whether name comes from the server's
// configuration (and so cannot be replaced or deleted through the API).
func (s *Service) IsConfiguredProfile(name string) bool {
	_, ok := s.cfg.Profiles[name]
	return ok
}

// DeleteProfile removes a stored profile; configured profiles cannot be
// deleted. An error wrapping ErrProfileNotFound when there is none.
func (s *Service) DeleteProfile(ctx context.Context, name string) error {
	if s.IsConfiguredProfile(name) {
		return fmt.Errorf("profile %q comes from the server's configuration: %w", name, ErrConfiguredProfile)
	}
	err := s.cfg.Store.DeleteProfile(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("profile %q: %w", name, ErrProfileNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete profile: %w", err)
	}
	return nil
}

// ErrConfiguredProfile is wrapped when a configured profile would change.
var ErrConfiguredProfile = errors.New("configured profile")

// ProfileNames lists every profile name, configured and stored, sorted.
func (s *Service) ProfileNames(ctx context.Context) ([]string, error) {
	names, err := s.profileNamesAll(ctx)
	if err != nil {
		return nil, err
	}
	slices.Sort(names)
	return names, nil
}

// decodeProfile reads a stored profile record.
func decodeProfile(name string, sp store.Profile) (Profile, error) {
	var p Profile
	if err := json.Unmarshal(sp.JSON, &p); err != nil {
		return Profile{}, fmt.Errorf("decode profile %s: %w", name, err)
	}
	p.Name = name
	p.Version = sp.Version
	return p, nil
}
