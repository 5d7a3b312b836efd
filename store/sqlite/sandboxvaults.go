package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// sandboxVaultColumns lists the columns scanSandboxVault reads, in its
// order.
const sandboxVaultColumns = `sandbox_id, revision, sealed, updated_at`

func scanSandboxVault(row rowScanner) (*store.SandboxVault, error) {
	var (
		v       store.SandboxVault
		updated int64
	)
	if err := row.Scan(&v.SandboxID, &v.Revision, &v.Sealed, &updated); err != nil {
		return nil, err
	}
	v.UpdatedAt = fromMicros(updated)
	return &v, nil
}

// PutSandboxVault stores v if the stored revision is prev (0: none
// stored); ErrConflict or ErrNotFound otherwise (see store.SandboxVaults).
func (st *Store) PutSandboxVault(ctx context.Context, v *store.SandboxVault, prev int64) error {
	updated := nowIfZero(v.UpdatedAt)
	var (
		res sql.Result
		err error
	)
	if prev == 0 {
		res, err = st.w.ExecContext(ctx, `INSERT INTO sandbox_vaults (`+sandboxVaultColumns+`)
			VALUES (?, ?, ?, ?) ON CONFLICT (sandbox_id) DO NOTHING`, v.SandboxID, v.Revision, v.Sealed, micros(updated))
	} else {
		res, err = st.w.ExecContext(ctx, `UPDATE sandbox_vaults SET revision = ?, sealed = ?, updated_at = ?
			WHERE sandbox_id = ? AND revision = ?`, v.Revision, v.Sealed, micros(updated), v.SandboxID, prev)
	}
	if err != nil {
		return fmt.Errorf("put sandbox vault: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("put sandbox vault: %w", err)
	}
	if n == 0 {
		if prev == 0 {
			return fmt.Errorf("put sandbox vault %s: %w", v.SandboxID, store.ErrConflict)
		}
		return st.missOrConflict(ctx, "put sandbox vault", `SELECT 1 FROM sandbox_vaults WHERE sandbox_id = ?`, v.SandboxID, prev)
	}
	v.UpdatedAt = updated
	return nil
}

// GetSandboxVault returns the record or ErrNotFound.
func (st *Store) GetSandboxVault(ctx context.Context, sandboxID string) (*store.SandboxVault, error) {
	v, err := scanSandboxVault(st.r.QueryRowContext(ctx, `SELECT `+sandboxVaultColumns+` FROM sandbox_vaults WHERE sandbox_id = ?`, sandboxID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get sandbox vault %s: %w", sandboxID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get sandbox vault: %w", err)
	}
	return v, nil
}

// DeleteSandboxVault removes the record; ErrNotFound if absent.
func (st *Store) DeleteSandboxVault(ctx context.Context, sandboxID string) error {
	return st.execOne(ctx, "delete sandbox vault", sandboxID, store.ErrNotFound, `DELETE FROM sandbox_vaults WHERE sandbox_id = ?`, sandboxID)
}

// ListSandboxVaults returns up to limit records with SandboxID > afterID
// ordered by SandboxID (limit <= 0: all).
func (st *Store) ListSandboxVaults(ctx context.Context, afterID string, limit int) ([]*store.SandboxVault, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT `+sandboxVaultColumns+` FROM sandbox_vaults
		WHERE sandbox_id > ? ORDER BY sandbox_id LIMIT ?`, afterID, sqlLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list sandbox vaults: %w", err)
	}
	defer rows.Close()
	var out []*store.SandboxVault
	for rows.Next() {
		v, err := scanSandboxVault(rows)
		if err != nil {
			return nil, fmt.Errorf("list sandbox vaults: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list sandbox vaults: %w", err)
	}
	return out, nil
}
