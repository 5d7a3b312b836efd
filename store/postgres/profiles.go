package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// PutProfile creates or replaces a profile; a zero UpdatedAt is set to the
// current time.
func (st *Store) PutProfile(ctx context.Context, p store.Profile) error {
	_, err := st.pool.Exec(ctx, `INSERT INTO profiles (name, data, updated_at) VALUES ($1, $2, $3)
		ON CONFLICT (name) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		p.Name, p.JSON, nowIfZero(p.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put profile: %w", err)
	}
	return nil
}

// scanProfile reads name, data, updated_at.
func scanProfile(row pgx.Row) (store.Profile, error) {
	var p store.Profile
	if err := row.Scan(&p.Name, &p.JSON, &p.UpdatedAt); err != nil {
		return store.Profile{}, err
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	return p, nil
}

// GetProfile returns the profile or ErrNotFound.
func (st *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(st.pool.QueryRow(ctx,
		`SELECT name, data, updated_at FROM profiles WHERE name = $1`, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Profile{}, fmt.Errorf("get profile %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Profile{}, fmt.Errorf("get profile: %w", err)
	}
	return p, nil
}

// ListProfiles returns every profile ordered by name, byte-wise.
func (st *Store) ListProfiles(ctx context.Context) ([]store.Profile, error) {
	rows, err := st.pool.Query(ctx, `SELECT name, data, updated_at FROM profiles ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Profile, error) {
		return scanProfile(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	return out, nil
}

// DeleteProfile removes a profile; ErrNotFound if absent.
func (st *Store) DeleteProfile(ctx context.Context, name string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM profiles WHERE name = $1`, name)
	if err != nil {
		return fmt.Errorf("delete profile: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete profile %s: %w", name, store.ErrNotFound)
	}
	return nil
}
