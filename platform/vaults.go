package platform

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Credential vaults. A vault is a named set of secrets assigned to Agents
// (vault_ids). Each secret names the environment variable that holds its
// placeholder in a Session's box and the one destination its value may go
// to (host, path prefix, header, format); the egress proxy puts the value
// into matching requests only (see platform/runner and package egress).
//
// Values are write-only: they are sealed (AES-256-GCM under the master
// key) the moment they arrive, bound to the vault, the name and the
// destination, and neither the API, the log nor an error message ever
// carries one. Changing a secret's destination means sending its value
// again, so that nobody who may call the API but does not know a value
// can point it elsewhere.

// Limits of vaults.
const (
	maxVaultName        = 200
	maxVaultDescription = 4 << 10
	maxVaultSecrets     = 100
	maxAgentVaults      = 16
)

// envName is a POSIX environment variable name.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

// reservedEnv are names a secret's placeholder may not take: the box's
// own and those protected delivery sets (see platform/runner).
var reservedEnv = map[string]bool{
	"PATH": true, "HOME": true, "PWD": true, "SHELL": true, "USER": true, "TERM": true,
	"SSL_CERT_FILE": true, "SSL_CERT_DIR": true, "NODE_EXTRA_CA_CERTS": true, "REQUESTS_CA_BUNDLE": true, "CURL_CA_BUNDLE": true,
}

// validSecretName checks a secret's name, the environment variable of its
// placeholder.
func validSecretName(name string) error {
	if !envName.MatchString(name) {
		return invalid("secret name %q must be an environment variable name ([A-Za-z_][A-Za-z0-9_]*, at most 128 characters)", name)
	}
	if reservedEnv[name] || strings.HasPrefix(name, "ASTRABOX_") || strings.HasPrefix(name, "LD_") {
		return invalid("secret name %s is reserved (PATH, HOME, the TLS trust variables, LD_* and ASTRABOX_* are the box's)", name)
	}
	return nil
}

// secretAAD binds a sealed value to its vault, its name and its whole
// destination: a sealed value copied to another secret or vault, or a
// destination changed in the database, does not open.
func secretAAD(vaultID string, s store.VaultSecret) string {
	return strings.Join([]string{"vault", vaultID, "secret", s.Name, s.Host, s.PathPrefix, s.Header, s.Format}, "\x00")
}

// sealSecret validates req and returns it as stored in vault vaultID, its
// value sealed.
func (s *Catalog) sealSecret(vaultID string, req wire.SecretRequest) (store.VaultSecret, error) {
	if err := validSecretName(req.Name); err != nil {
		return store.VaultSecret{}, err
	}
	if req.Value == "" {
		return store.VaultSecret{}, invalid("secret %s: value is required (values are write-only: send it whenever the secret is written)", req.Name)
	}
	if strings.TrimSpace(req.Host) == "" {
		return store.VaultSecret{}, invalid("secret %s: host is required (exact, or *.domain)", req.Name)
	}
	es := egress.Secret{Host: req.Host, PathPrefix: req.PathPrefix, Header: req.Header, Format: req.Format, Value: req.Value}
	if err := es.Validate(); err != nil {
		return store.VaultSecret{}, invalid("secret %s: %v", req.Name, err)
	}
	es = es.Canonical()
	sec := store.VaultSecret{Name: req.Name, Host: es.Host, PathPrefix: es.PathPrefix, Header: es.Header, Format: es.Format, UpdatedAt: s.stamp()}
	sealed, err := s.cfg.Vault.Seal([]byte(req.Value), secretAAD(vaultID, sec))
	if err != nil {
		return store.VaultSecret{}, fmt.Errorf("seal secret %s: %w", req.Name, err)
	}
	sec.Sealed = sealed
	return sec, nil
}

// toVault is the wire form of a stored vault: its secrets without their
// values.
func toVault(v *store.Vault) wire.Vault {
	out := wire.Vault{ID: v.ID, Name: v.Name, Description: v.Description, Secrets: make([]wire.VaultSecret, len(v.Secrets)), Version: v.Version,
		CreatedAt: stamp(v.CreatedAt), UpdatedAt: stamp(v.UpdatedAt)}
	for i, sec := range v.Secrets {
		out.Secrets[i] = wire.VaultSecret{Name: sec.Name, Host: sec.Host, PathPrefix: sec.PathPrefix, Header: sec.Header, Format: sec.Format,
			UpdatedAt: stamp(sec.UpdatedAt)}
	}
	return out
}

// validVaultFields checks and trims a vault's name and description.
func validVaultFields(req *wire.VaultRequest) error {
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > maxVaultName {
		return invalid("name is required (at most %d characters)", maxVaultName)
	}
	if len(req.Description) > maxVaultDescription {
		return invalid("description exceeds %d bytes", maxVaultDescription)
	}
	return nil
}

// CreateVault validates req, seals its secrets and stores a new vault.
func (s *Catalog) CreateVault(ctx context.Context, req wire.VaultRequest) (wire.Vault, error) {
	if err := needAdmin(ctx, "creating a vault"); err != nil {
		return wire.Vault{}, err
	}
	if err := validVaultFields(&req); err != nil {
		return wire.Vault{}, err
	}
	if req.Version != nil {
		return wire.Vault{}, invalid("version is set by the server")
	}
	if len(req.Secrets) > maxVaultSecrets {
		return wire.Vault{}, invalid("a vault holds at most %d secrets", maxVaultSecrets)
	}
	now := s.stamp()
	v := &store.Vault{ID: NewID("vlt", now), Name: req.Name, Description: req.Description, CreatedAt: now, UpdatedAt: now}
	for _, sr := range req.Secrets {
		sec, err := s.sealSecret(v.ID, sr)
		if err != nil {
			return wire.Vault{}, err
		}
		if _, dup := findSecret(v.Secrets, sec.Name); dup {
			return wire.Vault{}, invalid("secret %s is given twice", sec.Name)
		}
		v.Secrets = insertSecret(v.Secrets, sec)
	}
	if err := s.st.CreateVault(ctx, v); err != nil {
		return wire.Vault{}, fmt.Errorf("create vault: %w", err)
	}
	return toVault(v), nil
}

// GetVault returns a vault (VAULT_NOT_FOUND if none).
func (s *Catalog) GetVault(ctx context.Context, id string) (wire.Vault, error) {
	if err := needAdmin(ctx, "reading a vault"); err != nil {
		return wire.Vault{}, err
	}
	v, err := s.vault(ctx, id)
	if err != nil {
		return wire.Vault{}, err
	}
	return toVault(v), nil
}

func (s *Catalog) vault(ctx context.Context, id string) (*store.Vault, error) {
	v, err := s.st.GetVault(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sandbox.Errorf(CodeVaultNotFound, "vault %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get vault: %w", err)
	}
	return v, nil
}

// ListVaults pages vaults by id, as ListAgents pages Agents.
func (s *Catalog) ListVaults(ctx context.Context, cursor string, limit int) ([]wire.Vault, string, error) {
	if err := needAdmin(ctx, "listing vaults"); err != nil {
		return nil, "", err
	}
	if limit <= 0 || limit > 200 {
		limit = 50
	}
	vs, err := s.st.ListVaults(ctx, cursor, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list vaults: %w", err)
	}
	next := ""
	if len(vs) > limit {
		vs = vs[:limit]
		next = vs[limit-1].ID
	}
	out := make([]wire.Vault, len(vs))
	for i, v := range vs {
		out[i] = toVault(v)
	}
	return out, next, nil
}

// UpdateVault replaces a vault's name and description (its secrets are
// written one by one with PutSecret); with req.Version only that version
// (VERSION_CONFLICT otherwise).
func (s *Catalog) UpdateVault(ctx context.Context, id string, req wire.VaultRequest) (wire.Vault, error) {
	if err := needAdmin(ctx, "changing a vault"); err != nil {
		return wire.Vault{}, err
	}
	if err := validVaultFields(&req); err != nil {
		return wire.Vault{}, err
	}
	if req.Secrets != nil {
		return wire.Vault{}, invalid("secrets are written one by one: PUT /api/v1/vaults/%s/secrets/{name}", id)
	}
	return s.changeVault(ctx, id, req.Version, func(v *store.Vault) (bool, error) {
		v.Name, v.Description = req.Name, req.Description
		return true, nil
	})
}

// PutSecret creates or replaces secret name of vault id (the value is
// always sent: a destination never changes without it) and reports
// whether it created it.
func (s *Catalog) PutSecret(ctx context.Context, id, name string, req wire.SecretRequest) (wire.Vault, bool, error) {
	if err := needAdmin(ctx, "changing a vault's secrets"); err != nil {
		return wire.Vault{}, false, err
	}
	if req.Name != "" && req.Name != name {
		return wire.Vault{}, false, invalid("secret name %q in the body differs from %q in the path", req.Name, name)
	}
	req.Name = name
	sec, err := s.sealSecret(id, req)
	if err != nil {
		return wire.Vault{}, false, err
	}
	created := false
	out, err := s.changeVault(ctx, id, nil, func(v *store.Vault) (bool, error) {
		_, found := findSecret(v.Secrets, name)
		if !found && len(v.Secrets) >= maxVaultSecrets {
			return false, invalid("a vault holds at most %d secrets", maxVaultSecrets)
		}
		created = !found
		v.Secrets = insertSecret(v.Secrets, sec)
		return true, nil
	})
	return out, created, err
}

// DeleteSecret removes secret name of vault id (VAULT_SECRET_NOT_FOUND if
// it has none).
func (s *Catalog) DeleteSecret(ctx context.Context, id, name string) error {
	if err := needAdmin(ctx, "changing a vault's secrets"); err != nil {
		return err
	}
	_, err := s.changeVault(ctx, id, nil, func(v *store.Vault) (bool, error) {
		i, found := findSecret(v.Secrets, name)
		if !found {
			return false, sandbox.Errorf(CodeSecretNotFound, "vault %s has no secret %q", id, name)
		}
		v.Secrets = slices.Delete(v.Secrets, i, i+1)
		return true, nil
	})
	return err
}

// changeVault applies change to vault id and stores it; with version set,
// only to that version. A write that lost a race is retried on the newer
// record unless a version was named. change returns false to store
// nothing.
func (s *Catalog) changeVault(ctx context.Context, id string, version *int64, change func(*store.Vault) (bool, error)) (wire.Vault, error) {
	for {
		v, err := s.vault(ctx, id)
		if err != nil {
			return wire.Vault{}, err
		}
		if version != nil && *version != v.Version {
			return wire.Vault{}, sandbox.Errorf(CodeVersionConflict, "vault %s is at version %d, not %d", id, v.Version, *version)
		}
		if ok, err := change(v); err != nil || !ok {
			return toVault(v), err
		}
		v.UpdatedAt = s.stamp()
		err = s.st.UpdateVault(ctx, v)
		switch {
		case errors.Is(err, store.ErrConflict) && version == nil:
			continue
		case errors.Is(err, store.ErrConflict):
			return wire.Vault{}, sandbox.Errorf(CodeVersionConflict, "vault %s changed meanwhile", id)
		case errors.Is(err, store.ErrNotFound):
			return wire.Vault{}, sandbox.Errorf(CodeVaultNotFound, "vault %q not found", id)
		case err != nil:
			return wire.Vault{}, fmt.Errorf("update vault: %w", err)
		}
		return toVault(v), nil
	}
}

// DeleteVault removes a vault no Agent names (VAULT_IN_USE naming them
// otherwise: an Agent's credentials never vanish silently).
func (s *Catalog) DeleteVault(ctx context.Context, id string) error {
	if err := needAdmin(ctx, "deleting a vault"); err != nil {
		return err
	}
	if _, err := s.vault(ctx, id); err != nil {
		return err
	}
	agents, err := s.st.ListAgents(ctx, "", 0)
	if err != nil {
		return fmt.Errorf("list agents: %w", err)
	}
	var users []string
	for _, a := range agents {
		if slices.Contains(a.VaultIDs, id) {
			users = append(users, a.ID)
		}
	}
	if len(users) > 0 {
		if len(users) > 5 {
			users = append(users[:5], fmt.Sprintf("and %d more", len(users)-5))
		}
		return sandbox.Errorf(CodeVaultInUse, "vault %s is assigned to agents %s: remove it from their vault_ids first", id, strings.Join(users, ", "))
	}
	err = s.st.DeleteVault(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sandbox.Errorf(CodeVaultNotFound, "vault %q not found", id)
	}
	if err != nil {
		return fmt.Errorf("delete vault: %w", err)
	}
	return nil
}

// findSecret returns the index of secret name in ss (sorted by name) or
// where it would go, and whether it is there.
func findSecret(ss []store.VaultSecret, name string) (int, bool) {
	return slices.BinarySearchFunc(ss, name, func(s store.VaultSecret, n string) int { return strings.Compare(s.Name, n) })
}

// insertSecret puts sec into ss in name order, replacing one of its name.
func insertSecret(ss []store.VaultSecret, sec store.VaultSecret) []store.VaultSecret {
	i, found := findSecret(ss, sec.Name)
	if found {
		ss[i] = sec
		return ss
	}
	return slices.Insert(ss, i, sec)
}
