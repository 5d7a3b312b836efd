package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Vault is a named set of credentials assigned to Agents (store.Agent's
// VaultIDs). Every secret value is sealed by the platform before it
// reaches the store; the store keeps what it is given and never sees a
// value in the clear.
type Vault struct {
	ID          string
	Name        string
	Description string
	// Secrets are ordered by Name, each Name once (the caller keeps them
	// so; the store keeps the order it is given).
	Secrets []VaultSecret
	// Version is 1 after create and increases with every update.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// VaultSecret is one credential of a Vault: the environment variable that
// holds its placeholder in a box, where its value may go, and the value
// sealed (vault.Ring.Seal, bound to the vault, the name and the
// destination). The drivers keep a vault's secrets as one JSON document
// of these tags.
type VaultSecret struct {
	Name       string    `json:"name"`
	Host       string    `json:"host"`
	PathPrefix string    `json:"path_prefix"`
	Header     string    `json:"header"`
	Format     string    `json:"format"`
	Sealed     string    `json:"sealed"`
	UpdatedAt  time.Time `json:"updated_at"`
}

// Vaults keeps Vault records.
type Vaults interface {
	// CreateVault inserts v (Version set to 1, zero times set to now and
	// written back); ErrConflict if the id exists.
	CreateVault(ctx context.Context, v *Vault) error
	// GetVault returns the record or ErrNotFound.
	GetVault(ctx context.Context, id string) (*Vault, error)
	// UpdateVault replaces the record, secrets included, if its stored
	// Version equals v.Version, then increments v.Version and sets a zero
	// UpdatedAt to now; CreatedAt keeps the stored value and is written
	// back. ErrConflict on another version, ErrNotFound if absent.
	UpdateVault(ctx context.Context, v *Vault) error
	// DeleteVault removes the record; ErrNotFound if absent.
	DeleteVault(ctx context.Context, id string) error
	// ListVaults returns up to limit records with ID > afterID, ordered by
	// ID (limit <= 0: all).
	ListVaults(ctx context.Context, afterID string, limit int) ([]*Vault, error)
}

// MarshalVaultSecrets is the JSON document a driver keeps a vault's
// secrets as: an array of VaultSecret, times in UTC at the store's
// microsecond precision.
func MarshalVaultSecrets(ss []VaultSecret) ([]byte, error) {
	cp := make([]VaultSecret, len(ss))
	for i, s := range ss {
		s.UpdatedAt = s.UpdatedAt.UTC().Truncate(time.Microsecond)
		cp[i] = s
	}
	b, err := json.Marshal(cp)
	if err != nil {
		return nil, fmt.Errorf("encode secrets: %w", err)
	}
	return b, nil
}

// UnmarshalVaultSecrets decodes what MarshalVaultSecrets made (nil for an
// empty array), times in UTC.
func UnmarshalVaultSecrets(b []byte) ([]VaultSecret, error) {
	var out []VaultSecret
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode secrets: %w", err)
	}
	for i := range out {
		out[i].UpdatedAt = out[i].UpdatedAt.UTC()
	}
	if len(out) == 0 {
		out = nil
	}
	return out, nil
}

// SandboxVault is the Credential Vault of one sandbox (OpenSandbox's
// sandbox-local vault, served on the sandbox's egress API): one document
// of credentials, their values and bindings, sealed by the lifecycle
// service (vault.Ring.Seal, bound to the sandbox id) before it reaches the
// store; the store never sees a value in the clear.
type SandboxVault struct {
	SandboxID string
	// Revision is the vault's revision: 1 after create, one more after
	// every mutation. PutSandboxVault compares it.
	Revision  int64
	Sealed    string
	UpdatedAt time.Time
}

// SandboxVaults keeps SandboxVault records.
type SandboxVaults interface {
	// PutSandboxVault stores v (a zero UpdatedAt is set to now and written
	// back) if the stored record's Revision is prev, prev 0 meaning that
	// none is stored (a create). ErrConflict when a record exists for a
	// create or has another Revision; ErrNotFound when none exists for an
	// update. Of concurrent puts from one prev exactly one succeeds.
	PutSandboxVault(ctx context.Context, v *SandboxVault, prev int64) error
	// GetSandboxVault returns the record or ErrNotFound.
	GetSandboxVault(ctx context.Context, sandboxID string) (*SandboxVault, error)
	// DeleteSandboxVault removes the record; ErrNotFound if absent.
	DeleteSandboxVault(ctx context.Context, sandboxID string) error
	// ListSandboxVaults returns up to limit records with SandboxID >
	// afterID, ordered by SandboxID (limit <= 0: all).
	ListSandboxVaults(ctx context.Context, afterID string, limit int) ([]*SandboxVault, error)
}
