package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// profileColumns lists the columns scanProfile reads, in its order.
const profileColumns = `name, data, updated_at, version`

// PutProfile stores p (a zero UpdatedAt is set to the current time) and
// returns the stored record. With p.Version 0 it creates or replaces; with
// p.Version > 0 it replaces only the stored record of that version
// (ErrConflict for another version, ErrNotFound when absent). Each is one
// statement: the row lock lets exactly one of concurrent puts from one
// version pass.
func (st *Store) PutProfile(ctx context.Context, p store.Profile) (store.Profile, error) {
	p.UpdatedAt = nowIfZero(p.UpdatedAt).UTC().Truncate(time.Microsecond)
	var (
		version int64
		err     error
	)
	if p.Version == 0 {
		err = st.pool.QueryRow(ctx, `INSERT INTO profiles (name, data, updated_at, version)
			VALUES ($1, $2, $3, 1)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data,
				updated_at = excluded.updated_at, version = profiles.version + 1
			RETURNING version`, p.Name, p.JSON, p.UpdatedAt).Scan(&version)
	} else {
		err = st.pool.QueryRow(ctx, `UPDATE profiles SET data = $1, updated_at = $2,
			version = version + 1 WHERE name = $3 AND version = $4 RETURNING version`,
			p.JSON, p.UpdatedAt, p.Name, p.Version).Scan(&version)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Profile{}, st.missOrConflict(ctx, "put profile",
			`SELECT EXISTS (SELECT 1 FROM profiles WHERE name = $1)`, p.Name, p.Version)
	}
	if err != nil {
		return store.Profile{}, fmt.Errorf("put profile: %w", err)
	}
	p.Version = version
	return p, nil
}

// scanProfile reads one row of profileColumns.
func scanProfile(row pgx.Row) (store.Profile, error) {
	var p store.Profile
	if err := row.Scan(&p.Name, &p.JSON, &p.UpdatedAt, &p.Version); err != nil {
		return store.Profile{}, err
	}
	p.UpdatedAt = p.UpdatedAt.UTC()
	return p, nil
}

// GetProfile returns the profile or ErrNotFound.
func (st *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(st.pool.QueryRow(ctx,
		`SELECT `+profileColumns+` FROM profiles WHERE name = $1`, name))
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
	rows, err := st.pool.Query(ctx, `SELECT `+profileColumns+` FROM profiles ORDER BY name`)
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
