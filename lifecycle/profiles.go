package lifecycle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// validProfileName accepts 1-64 of [a-z0-9-_.], starting alphanumeric.
func validProfileName(name string) error {
	if name == "" || len(name) > 64 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "profile name must be 1 to 64 characters")
	}
	for i, c := range name {
		ok := (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || (i > 0 && (c == '-' || c == '_' || c == '.'))
		if !ok {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid profile name %q (lower-case letters, digits, '-', '_', '.')", name)
		}
	}
	return nil
}

// profile returns the named profile: from the configuration, else from
// the store.
func (s *Service) profile(ctx context.Context, name string) (Profile, error) {
	if p, ok := s.cfg.Profiles[name]; ok {
		return p, nil
	}
	sp, err := s.cfg.Store.GetProfile(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		names, _ := s.profileNamesAll(ctx)
		return Profile{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown profile %q (known: %s)", name, strings.Join(names, ", "))
	}
	if err != nil {
		return Profile{}, fmt.Errorf("get profile: %w", err)
	}
	return decodeProfile(name, sp)
}

// Profiles lists every profile, configured and stored, by name.
func (s *Service) Profiles(ctx context.Context) ([]Profile, error) {
	names, err := s.profileNamesAll(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Profile, 0, len(names))
	for _, n := range names {
		p, err := s.profile(ctx, n)
		if err != nil {
			// One unreadable profile must not hide the others (nor stop
			// every pool); it is logged and left out.
			s.log.Warn("profile cannot be read; leaving it out", "profile", n, "err", err)
			continue
		}
		out = append(out, p)
	}
	return out, nil
}

// ErrVersionConflict is wrapped by PutProfile when p.Version is set and
// the stored profile is at another version.
var ErrVersionConflict = errors.New("profile version conflict")

// PutProfile stores a profile and returns it as stored (with its new
// Version). With p.Version 0 it creates or replaces; otherwise it replaces
// only that stored version (ErrVersionConflict for another,
// ErrProfileNotFound when none is stored). Configured profiles cannot be
// replaced; the backend must be installed (it may be disabled: requests
// using the profile then fail with SANDBOX_BACKEND_DISABLED) and the
// profile's spec valid.
func (s *Service) PutProfile(ctx context.Context, p Profile) (Profile, error) {
	if err := validProfileName(p.Name); err != nil {
		return Profile{}, err
	}
	if _, ok := s.cfg.Profiles[p.Name]; ok {
		return Profile{}, sandbox.Errorf(sandbox.CodeConflict, "profile %q comes from the server's configuration and cannot be replaced", p.Name)
	}
	if p.Backend != "" {
		known := false
		for _, b := range s.cfg.Installed {
			known = known || b == p.Backend
		}
		if _, enabled := s.cfg.Backends[p.Backend]; !known && !enabled {
			return Profile{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown backend %q", p.Backend)
		}
	}
	spec := sandbox.Spec{Image: p.Image, Resources: p.Resources, Timeout: p.Timeout, IdleTimeout: p.IdleTimeout,
		Network: sandbox.NetworkPolicy{Mode: p.Network}, Capabilities: p.Capabilities, Env: p.Env, Runtime: p.Runtime}
	if err := spec.Validate(); err != nil {
		return Profile{}, err
	}
	if err := s.cfg.Limits.checkProfile(p); err != nil {
		return Profile{}, err
	}
	if p.SessionLimits != nil {
		if err := p.SessionLimits.Validate(); err != nil {
			return Profile{}, err
		}
	}
	if p.PoolSize < 0 || p.PoolSize > MaxPoolSize {
		return Profile{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "poolSize must be 0 to %d", MaxPoolSize)
	}
	version := p.Version
	p.Version = 0 // kept in the record, not in its JSON
	b, err := json.Marshal(p)
	if err != nil {
		return Profile{}, fmt.Errorf("encode profile: %w", err)
	}
	stored, err := s.cfg.Store.PutProfile(ctx, store.Profile{Name: p.Name, JSON: b, UpdatedAt: s.now().UTC(), Version: version})
	switch {
	case errors.Is(err, store.ErrConflict):
		return Profile{}, fmt.Errorf("profile %q: %w", p.Name, ErrVersionConflict)
	case errors.Is(err, store.ErrNotFound):
		return Profile{}, fmt.Errorf("profile %q: %w", p.Name, ErrProfileNotFound)
	case err != nil:
		return Profile{}, fmt.Errorf("store profile: %w", err)
	}
	p.Version = stored.Version
	return p, nil
}

func (s *Service) profileNamesAll(ctx context.Context) ([]string, error) {
	seen := map[string]bool{}
	for n := range s.cfg.Profiles {
		seen[n] = true
	}
	stored, err := s.cfg.Store.ListProfiles(ctx)
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	for _, p := range stored {
		seen[p.Name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out, nil
}

// MaxPoolSize bounds a profile's warm pool: ready boxes are not counted
// against the sandbox quota, so their number must be bounded by itself.
const MaxPoolSize = 64

// profileJSON is Profile on the wire: timeouts in whole seconds.
type profileJSON struct {
	profileFields
	Timeout     int64 `json:"timeout,omitempty"`
	IdleTimeout int64 `json:"idleTimeout,omitempty"`
}

// profileFields has Profile's fields without its methods.
type profileFields Profile

// MarshalJSON writes the profile with its timeouts in seconds.
func (p Profile) MarshalJSON() ([]byte, error) {
	return json.Marshal(profileJSON{profileFields(p), int64(p.Timeout / time.Second), int64(p.IdleTimeout / time.Second)})
}

// UnmarshalJSON reads a profile whose timeouts are in seconds; they must
// not be negative, and unknown fields are refused.
func (p *Profile) UnmarshalJSON(b []byte) error {
	var j profileJSON
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&j); err != nil {
		return err
	}
	if j.Timeout < 0 || j.IdleTimeout < 0 || j.Timeout > maxSeconds || j.IdleTimeout > maxSeconds {
		return fmt.Errorf("profile timeouts must be 0 to %d seconds", maxSeconds)
	}
	*p = Profile(j.profileFields)
	p.Timeout, p.IdleTimeout = time.Duration(j.Timeout)*time.Second, time.Duration(j.IdleTimeout)*time.Second
	return nil
}

// maxSeconds keeps a timeout in seconds representable as a time.Duration.
const maxSeconds = int64(1<<63-1) / int64(time.Second)
