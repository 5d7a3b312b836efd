package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/astrabox/astrabox/store"
)

// sandboxVaultColumns lists the columns scanSandboxVault reads, in its
// order.
const sandboxVaultColumns = `sandbox_id, revision, sealed, updated_at`

func scanSandboxVault(row pgx.Row) (*store.SandboxVault, error) {
	var v store.SandboxVault
	if err := row.Scan(&v.SandboxID, &v.Revision, &v.Sealed, &v.UpdatedAt); err != nil {
		return nil, err
	}
	v.UpdatedAt = v.UpdatedAt.UTC()
	return &v, nil
}

// PutSandboxVault stores v if the stored revision is prev (0: none
// stored); ErrConflict or ErrNotFound otherwise (see store.SandboxVaults).
// Of concurrent updates from one revision the row lock lets exactly one
// pass.
func (st *Store) PutSandboxVault(ctx context.Context, v *store.SandboxVault, prev int64) error {
	updated := nowIfZero(v.UpdatedAt)
	var (
		tag pgconn.CommandTag
		err error
	)
	if prev == 0 {
		tag, err = st.pool.Exec(ctx, `INSERT INTO sandbox_vaults (`+sandboxVaultColumns+`)
			VALUES ($1, $2, $3, $4) ON CONFLICT (sandbox_id) DO NOTHING`, v.SandboxID, v.Revision, v.Sealed, updated)
	} else {
		tag, err = st.pool.Exec(ctx, `UPDATE sandbox_vaults SET revision = $1, sealed = $2, updated_at = $3
			WHERE sandbox_id = $4 AND revision = $5`, v.Revision, v.Sealed, updated, v.SandboxID, prev)
	}
	if err != nil {
		return fmt.Errorf("put sandbox vault: %w", err)
	}
	if tag.RowsAffected() == 0 {
		if prev == 0 {
			return fmt.Errorf("put sandbox vault %s: %w", v.SandboxID, store.ErrConflict)
		}
		return st.missOrConflict(ctx, "put sandbox vault",
			`SELECT EXISTS (SELECT 1 FROM sandbox_vaults WHERE sandbox_id = $1)`, v.SandboxID, prev)
	}
	v.UpdatedAt = updated
	return nil
}

// GetSandboxVault returns the record or ErrNotFound.
func (st *Store) GetSandboxVault(ctx context.Context, sandboxID string) (*store.SandboxVault, error) {
	v, err := scanSandboxVault(st.pool.QueryRow(ctx, `SELECT `+sandboxVaultColumns+` FROM sandbox_vaults WHERE sandbox_id = $1`, sandboxID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get sandbox vault %s: %w", sandboxID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox vault: %w", err)
	}
	return v, nil
}

// DeleteSandboxVault removes the record; ErrNotFound if absent.
func (st *Store) DeleteSandboxVault(ctx context.Context, sandboxID string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM sandbox_vaults WHERE sandbox_id = $1`, sandboxID)
	if err != nil {
		return fmt.Errorf("delete sandbox vault: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete sandbox vault %s: %w", sandboxID, store.ErrNotFound)
	}
	return nil
}

// ListSandboxVaults returns up to limit records with SandboxID > afterID
// ordered by SandboxID (limit <= 0: all).
func (st *Store) ListSandboxVaults(ctx context.Context, afterID string, limit int) ([]*store.SandboxVault, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+sandboxVaultColumns+` FROM sandbox_vaults
		WHERE sandbox_id > $1 ORDER BY sandbox_id LIMIT $2`, afterID, sqlLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list sandbox vaults: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.SandboxVault, error) {
		return scanSandboxVault(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list sandbox vaults: %w", err)
	}
	return out, nil
}
