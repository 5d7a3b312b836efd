package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
)

// RuntimeProfile is the platform view of a profile: every field, with the
// model key replaced by whether one is set.
type RuntimeProfile struct {
	lifecycle.Profile
	// APIKeySet reports a stored model key (the key itself is never shown).
	APIKeySet bool `json:"api_key_set"`
}

// modelAPIs are the model wires a profile may name.
var modelAPIs = []string{"openai-chat"}

// keyAAD binds a sealed model key to its profile and its destination
// (the endpoint's canonical base URL and wire): a key copied to another
// profile, or an endpoint changed in the database, does not open.
func keyAAD(profile string, m *lifecycle.ModelEndpoint) string {
	return strings.Join([]string{"profile", profile, "model.api_key", modelDestination(m.BaseURL), modelAPI(m)}, "\x00")
}

// legacyKeyAAD is how keys were sealed before they were bound to their
// destination; such keys still open, and ResealModelKeys binds them.
func legacyKeyAAD(profile string) string { return "profile:" + profile + ":model.api_key" }

// modelDestination is the canonical form of a model base URL (scheme and
// host lower-cased, no trailing slash), what a sealed key is bound to.
func modelDestination(raw string) string {
	u, err := url.Parse(strings.TrimRight(raw, "/"))
	if err != nil {
		return raw
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	return u.String()
}

// modelAPI is the endpoint's wire, "openai-chat" when unnamed.
func modelAPI(m *lifecycle.ModelEndpoint) string {
	if m.API == "" {
		return "openai-chat"
	}
	return m.API
}

// RuntimeProfile returns the named profile (PROFILE_NOT_FOUND if none).
func (s *Catalog) RuntimeProfile(ctx context.Context, name string) (lifecycle.Profile, error) {
	p, err := s.cfg.Sandboxes.LookupProfile(ctx, name)
	if errors.Is(err, lifecycle.ErrProfileNotFound) {
		return lifecycle.Profile{}, sandbox.Errorf(CodeProfileNotFound, "runtime profile %q not found", name)
	}
	if err != nil {
		return lifecycle.Profile{}, fmt.Errorf("runtime profile: %w", err)
	}
	return p, nil
}

// Redact returns the client view of p.
func Redact(p lifecycle.Profile) RuntimeProfile {
	out := RuntimeProfile{Profile: p}
	if p.Model != nil {
		m := *p.Model
		out.APIKeySet = m.SealedKey != "" || m.APIKey != ""
		m.APIKey, m.SealedKey = "", ""
		out.Model = &m
	}
	return out
}

// ListRuntimeProfiles returns every profile, redacted.
func (s *Catalog) ListRuntimeProfiles(ctx context.Context) ([]RuntimeProfile, error) {
	ps, err := s.cfg.Sandboxes.Profiles(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]RuntimeProfile, len(ps))
	for i, p := range ps {
		out[i] = Redact(p)
	}
	return out, nil
}

// PutRuntimeProfile validates the platform fields, seals a new model key
// (keeping the stored one when the request sends none) and stores p; a
// non-zero p.Version updates only that version (VERSION_CONFLICT).
func (s *Catalog) PutRuntimeProfile(ctx context.Context, p lifecycle.Profile) (RuntimeProfile, error) {
	if err := needAdmin(ctx, "changing a runtime profile"); err != nil {
		return RuntimeProfile{}, err
	}
	for _, k := range p.EngineKinds {
		if _, err := s.cfg.Engines.Get(k); err != nil {
			return RuntimeProfile{}, sandbox.Errorf(CodeEngineNotInstalled, "engine kind %q is not installed", k)
		}
	}
	if m := p.Model; m != nil {
		if err := validModelURL(m.BaseURL); err != nil {
			return RuntimeProfile{}, err
		}
		if m.API == "" {
			m.API = "openai-chat"
		}
		if m.API != "openai-chat" {
			return RuntimeProfile{}, invalid("model.api %q is not supported (supported: %s)", m.API, strings.Join(modelAPIs, ", "))
		}
		if m.Retries != nil && (*m.Retries < 0 || *m.Retries > lifecycle.MaxModelRetries) {
			return RuntimeProfile{}, invalid("model.retries must be between 0 and %d", lifecycle.MaxModelRetries)
		}
		if m.SealedKey != "" {
			return RuntimeProfile{}, invalid("model.api_key_sealed is set by the server; send model.api_key")
		}
		if m.APIKey != "" {
			sealed, err := s.cfg.Vault.Seal([]byte(m.APIKey), keyAAD(p.Name, m))
			if err != nil {
				return RuntimeProfile{}, fmt.Errorf("seal model key: %w", err)
			}
			m.APIKey, m.SealedKey = "", sealed
		} else if old, err := s.cfg.Sandboxes.LookupProfile(ctx, p.Name); err == nil && old.Model != nil && old.Model.SealedKey != "" {
			// The write-only key is bound to where it goes: keeping it for
			// another endpoint would let anyone who may edit the profile
			// send it there (test-model, a Session).
			if modelDestination(old.Model.BaseURL) != modelDestination(m.BaseURL) || modelAPI(old.Model) != m.API {
				return RuntimeProfile{}, invalid("model.api_key is required: the stored key is bound to %s and the endpoint changed (send the key again, or keep base_url and api)",
					modelDestination(old.Model.BaseURL))
			}
			m.SealedKey = old.Model.SealedKey
		}
	}
	stored, err := s.cfg.Sandboxes.PutProfile(ctx, p)
	switch {
	case errors.Is(err, lifecycle.ErrVersionConflict):
		return RuntimeProfile{}, sandbox.Errorf(CodeVersionConflict, "runtime profile %q is not at version %d", p.Name, p.Version)
	case errors.Is(err, lifecycle.ErrProfileNotFound):
		return RuntimeProfile{}, sandbox.Errorf(CodeProfileNotFound, "runtime profile %q not found (PUT without version creates it)", p.Name)
	case err != nil:
		return RuntimeProfile{}, err
	}
	return Redact(stored), nil
}

// DeleteRuntimeProfile removes a stored profile.
func (s *Catalog) DeleteRuntimeProfile(ctx context.Context, name string) error {
	if err := needAdmin(ctx, "deleting a runtime profile"); err != nil {
		return err
	}
	err := s.cfg.Sandboxes.DeleteProfile(ctx, name)
	switch {
	case errors.Is(err, lifecycle.ErrProfileNotFound):
		return sandbox.Errorf(CodeProfileNotFound, "runtime profile %q not found", name)
	case errors.Is(err, lifecycle.ErrConfiguredProfile):
		return sandbox.Errorf(sandbox.CodeConflict, "runtime profile %q comes from the server's configuration and cannot be deleted", name)
	}
	return err
}

// ModelKey opens the profile's sealed model key ("" when none is set).
func (s *Catalog) ModelKey(p lifecycle.Profile) (string, error) {
	if p.Model == nil {
		return "", nil
	}
	if p.Model.APIKey != "" { // a configured profile may carry it in the config file
		return p.Model.APIKey, nil
	}
	if p.Model.SealedKey == "" {
		return "", nil
	}
	k, _, err := s.openModelKey(p)
	return string(k), err
}

// openModelKey opens p's sealed key under its bound AAD, or under the
// legacy profile-only AAD (legacy true) for a key sealed before keys were
// bound to their endpoint.
func (s *Catalog) openModelKey(p lifecycle.Profile) (key []byte, legacy bool, err error) {
	k, err := s.cfg.Vault.Open(p.Model.SealedKey, keyAAD(p.Name, p.Model))
	if err == nil {
		return k, false, nil
	}
	if k, lerr := s.cfg.Vault.Open(p.Model.SealedKey, legacyKeyAAD(p.Name)); lerr == nil {
		return k, true, nil
	}
	return nil, false, fmt.Errorf("open model key of profile %s: %w", p.Name, err)
}

func validModelURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return invalid("model.base_url must be an http(s) URL such as https://api.openai.com/v1")
	}
	if u.User != nil {
		return invalid("model.base_url must not carry credentials; send model.api_key")
	}
	return nil
}

// MarshalJSON writes the profile's fields and api_key_set (the embedded
// profile's own MarshalJSON would otherwise hide the latter).
func (p RuntimeProfile) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(p.Profile)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["api_key_set"] = json.RawMessage(strconv.FormatBool(p.APIKeySet))
	return json.Marshal(m)
}

// ResealModelKeys re-seals every stored profile's model key that is sealed
// under an older master key with the newest one, so that after a rotation
// (a new key first in the key file) the old key can be dropped once this
// has run; keys sealed before keys were bound to their endpoint are
// re-sealed bound. It returns how many profiles it re-sealed.
func (s *Catalog) ResealModelKeys(ctx context.Context) (int, error) {
	ps, err := s.cfg.Sandboxes.Profiles(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		if p.Model == nil || p.Model.SealedKey == "" || s.cfg.Sandboxes.IsConfiguredProfile(p.Name) {
			continue
		}
		key, legacy, err := s.openModelKey(p)
		if err != nil {
			return n, fmt.Errorf("reseal profile %s: %w", p.Name, err)
		}
		if !legacy && !s.cfg.Vault.NeedsReseal(p.Model.SealedKey) {
			continue
		}
		sealed, err := s.cfg.Vault.Seal(key, keyAAD(p.Name, p.Model))
		if err != nil {
			return n, err
		}
		p.Model.SealedKey = sealed
		if _, err := s.cfg.Sandboxes.PutProfile(ctx, p); err != nil { // conditional on p.Version
			return n, fmt.Errorf("reseal profile %s: %w", p.Name, err)
		}
		n++
	}
	return n, nil
}
