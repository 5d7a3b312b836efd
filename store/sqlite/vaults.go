package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// vaultColumns lists the columns scanVault reads, in its order.
const vaultColumns = `id, name, description, secrets, version, created_at, updated_at`

// scanVault reads one row of vaultColumns.
func scanVault(row rowScanner) (*store.Vault, error) {
	var (
		v                store.Vault
		secrets          string
		created, updated int64
	)
	if err := row.Scan(&v.ID, &v.Name, &v.Description, &secrets, &v.Version, &created, &updated); err != nil {
		return nil, err
	}
	var err error
	if v.Secrets, err = store.UnmarshalVaultSecrets([]byte(secrets)); err != nil {
		return nil, err
	}
	v.CreatedAt, v.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &v, nil
}

// CreateVault inserts v with Version 1, first setting its zero CreatedAt
// and UpdatedAt to now in v; ErrConflict if the id exists.
func (st *Store) CreateVault(ctx context.Context, v *store.Vault) error {
	now := time.Now().UTC()
	if v.CreatedAt.IsZero() {
		v.CreatedAt = now
	}
	if v.UpdatedAt.IsZero() {
		v.UpdatedAt = now
	}
	secrets, err := store.MarshalVaultSecrets(v.Secrets)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	if err := st.execOne(ctx, "create vault", v.ID, store.ErrConflict, `INSERT INTO vaults (`+vaultColumns+`)
		VALUES (?, ?, ?, ?, 1, ?, ?) ON CONFLICT (id) DO NOTHING`,
		v.ID, v.Name, v.Description, string(secrets), micros(v.CreatedAt), micros(v.UpdatedAt)); err != nil {
		return err
	}
	v.Version = 1
	return nil
}

// GetVault returns the record or ErrNotFound.
func (st *Store) GetVault(ctx context.Context, id string) (*store.Vault, error) {
	v, err := scanVault(st.r.QueryRowContext(ctx, `SELECT `+vaultColumns+` FROM vaults WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get vault %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get vault: %w", err)
	}
	return v, nil
}

// UpdateVault replaces the record if its stored Version equals v.Version,
// then increments v.Version; a zero UpdatedAt is set to now. CreatedAt
// keeps the stored value, which is written back into v. ErrConflict on
// another version, ErrNotFound if absent.
func (st *Store) UpdateVault(ctx context.Context, v *store.Vault) error {
	secrets, err := store.MarshalVaultSecrets(v.Secrets)
	if err != nil {
		return fmt.Errorf("update vault: %w", err)
	}
	updated := nowIfZero(v.UpdatedAt)
	var created int64
	err = st.w.QueryRowContext(ctx, `UPDATE vaults SET name = ?, description = ?, secrets = ?,
		updated_at = ?, version = version + 1 WHERE id = ? AND version = ? RETURNING created_at`,
		v.Name, v.Description, string(secrets), micros(updated), v.ID, v.Version).Scan(&created)
	if errors.Is(err, sql.ErrNoRows) {
		return st.missOrConflict(ctx, "update vault", `SELECT 1 FROM vaults WHERE id = ?`, v.ID, v.Version)
	}
	if err != nil {
		return fmt.Errorf("update vault: %w", err)
	}
	v.CreatedAt, v.UpdatedAt = fromMicros(created), updated
	v.Version++
	return nil
}

// DeleteVault removes the record; ErrNotFound if absent.
func (st *Store) DeleteVault(ctx context.Context, id string) error {
	return st.execOne(ctx, "delete vault", id, store.ErrNotFound, `DELETE FROM vaults WHERE id = ?`, id)
}

// ListVaults returns up to limit records with ID > afterID ordered by ID
// (limit <= 0: all).
func (st *Store) ListVaults(ctx context.Context, afterID string, limit int) ([]*store.Vault, error) {
	return queryAll(ctx, st.r, "list vaults", scanVault, `SELECT `+vaultColumns+` FROM vaults
		WHERE id > ? ORDER BY id LIMIT ?`, afterID, sqlLimit(int64(limit)))
}
