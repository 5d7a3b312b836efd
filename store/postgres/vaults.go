package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// vaultColumns lists the columns scanVault reads, in its order.
const vaultColumns = `id, name, description, secrets, version, created_at, updated_at`

// scanVault reads one row of vaultColumns.
func scanVault(row pgx.Row) (*store.Vault, error) {
	var (
		v       store.Vault
		secrets []byte
	)
	if err := row.Scan(&v.ID, &v.Name, &v.Description, &secrets, &v.Version, &v.CreatedAt, &v.UpdatedAt); err != nil {
		return nil, err
	}
	var err error
	if v.Secrets, err = store.UnmarshalVaultSecrets(secrets); err != nil {
		return nil, err
	}
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
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
	tag, err := st.pool.Exec(ctx, `INSERT INTO vaults (`+vaultColumns+`)
		VALUES ($1, $2, $3, $4, 1, $5, $6) ON CONFLICT (id) DO NOTHING`,
		v.ID, v.Name, v.Description, secrets, v.CreatedAt, v.UpdatedAt)
	if err != nil {
		return fmt.Errorf("create vault: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create vault %s: %w", v.ID, store.ErrConflict)
	}
	v.Version = 1
	return nil
}

// GetVault returns the record or ErrNotFound.
func (st *Store) GetVault(ctx context.Context, id string) (*store.Vault, error) {
	v, err := scanVault(st.pool.QueryRow(ctx, `SELECT `+vaultColumns+` FROM vaults WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
// another version, ErrNotFound if absent. Of concurrent updates from one
// Version the row lock lets exactly one pass.
func (st *Store) UpdateVault(ctx context.Context, v *store.Vault) error {
	secrets, err := store.MarshalVaultSecrets(v.Secrets)
	if err != nil {
		return fmt.Errorf("update vault: %w", err)
	}
	updated := nowIfZero(v.UpdatedAt)
	var created time.Time
	err = st.pool.QueryRow(ctx, `UPDATE vaults SET name = $1, description = $2, secrets = $3,
		updated_at = $4, version = version + 1 WHERE id = $5 AND version = $6 RETURNING created_at`,
		v.Name, v.Description, secrets, updated, v.ID, v.Version).Scan(&created)
	if errors.Is(err, pgx.ErrNoRows) {
		return st.missOrConflict(ctx, "update vault",
			`SELECT EXISTS (SELECT 1 FROM vaults WHERE id = $1)`, v.ID, v.Version)
	}
	if err != nil {
		return fmt.Errorf("update vault: %w", err)
	}
	v.CreatedAt, v.UpdatedAt = created.UTC(), updated
	v.Version++
	return nil
}

// DeleteVault removes the record; ErrNotFound if absent.
func (st *Store) DeleteVault(ctx context.Context, id string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM vaults WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete vault: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete vault %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// ListVaults returns up to limit records with ID > afterID ordered by ID
// (limit <= 0: all).
func (st *Store) ListVaults(ctx context.Context, afterID string, limit int) ([]*store.Vault, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+vaultColumns+` FROM vaults
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, sqlLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list vaults: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Vault, error) {
		return scanVault(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list vaults: %w", err)
	}
	return out, nil
}
