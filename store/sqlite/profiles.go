package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// PutProfile creates or replaces a profile; a zero UpdatedAt is set to the
// current time.
func (st *Store) PutProfile(ctx context.Context, p store.Profile) error {
	_, err := st.w.ExecContext(ctx, `INSERT INTO profiles (name, data, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET data = excluded.data, updated_at = excluded.updated_at`,
		p.Name, p.JSON, micros(nowIfZero(p.UpdatedAt)))
	if err != nil {
		return fmt.Errorf("put profile: %w", err)
	}
	return nil
}

// scanProfile reads name, data, updated_at.
func scanProfile(row rowScanner) (store.Profile, error) {
	var (
		p       store.Profile
		updated int64
	)
	if err := row.Scan(&p.Name, &p.JSON, &updated); err != nil {
		return store.Profile{}, err
	}
	p.UpdatedAt = fromMicros(updated)
	return p, nil
}

// GetProfile returns the profile or ErrNotFound.
func (st *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(st.r.QueryRowContext(ctx,
		`SELECT name, data, updated_at FROM profiles WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Profile{}, fmt.Errorf("get profile %s: %w", name, store.ErrNotFound)
	}
	if err != nil {
		return store.Profile{}, fmt.Errorf("get profile: %w", err)
	}
	return p, nil
}

// ListProfiles returns every profile ordered by name, byte-wise.
func (st *Store) ListProfiles(ctx context.Context) ([]store.Profile, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT name, data, updated_at FROM profiles ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	defer rows.Close()
	var out []store.Profile
	for rows.Next() {
		p, err := scanProfile(rows)
		if err != nil {
			return nil, fmt.Errorf("list profiles: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list profiles: %w", err)
	}
	return out, nil
}

// DeleteProfile removes a profile; ErrNotFound if absent.
func (st *Store) DeleteProfile(ctx context.Context, name string) error {
	res, err := st.w.ExecContext(ctx, `DELETE FROM profiles WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete profile: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete profile: %w", err)
	} else if n == 0 {
		return fmt.Errorf("delete profile %s: %w", name, store.ErrNotFound)
	}
	return nil
}
