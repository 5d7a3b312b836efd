package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// profileColumns lists the columns scanProfile reads, in its order.
const profileColumns = `name, data, updated_at, version`

// PutProfile stores p (a zero UpdatedAt is set to the current time) and
// returns the stored record. With p.Version 0 it creates or replaces; with
// p.Version > 0 it replaces only the stored record of that version
// (ErrConflict for another version, ErrNotFound when absent). Each is one
// statement on the single writer, so of concurrent puts from one version
// exactly one succeeds.
func (st *Store) PutProfile(ctx context.Context, p store.Profile) (store.Profile, error) {
	p.UpdatedAt = fromMicros(micros(nowIfZero(p.UpdatedAt)))
	var (
		version int64
		err     error
	)
	if p.Version == 0 {
		err = st.w.QueryRowContext(ctx, `INSERT INTO profiles (name, data, updated_at, version)
			VALUES (?, ?, ?, 1)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data,
				updated_at = excluded.updated_at, version = profiles.version + 1
			RETURNING version`, p.Name, p.JSON, micros(p.UpdatedAt)).Scan(&version)
	} else {
		err = st.w.QueryRowContext(ctx, `UPDATE profiles SET data = ?, updated_at = ?, version = version + 1
			WHERE name = ? AND version = ? RETURNING version`,
			p.JSON, micros(p.UpdatedAt), p.Name, p.Version).Scan(&version)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return store.Profile{}, st.missOrConflict(ctx, "put profile", `SELECT 1 FROM profiles WHERE name = ?`, p.Name, p.Version)
	}
	if err != nil {
		return store.Profile{}, fmt.Errorf("put profile: %w", err)
	}
	p.Version = version
	return p, nil
}

// scanProfile reads one row of profileColumns.
func scanProfile(row rowScanner) (store.Profile, error) {
	var (
		p       store.Profile
		updated int64
	)
	if err := row.Scan(&p.Name, &p.JSON, &updated, &p.Version); err != nil {
		return store.Profile{}, err
	}
	p.UpdatedAt = fromMicros(updated)
	return p, nil
}

// GetProfile returns the profile or ErrNotFound.
func (st *Store) GetProfile(ctx context.Context, name string) (store.Profile, error) {
	p, err := scanProfile(st.r.QueryRowContext(ctx,
		`SELECT `+profileColumns+` FROM profiles WHERE name = ?`, name))
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
	return queryAll(ctx, st.r, "list profiles", scanProfile, `SELECT `+profileColumns+` FROM profiles ORDER BY name`)
}

// DeleteProfile removes a profile; ErrNotFound if absent.
func (st *Store) DeleteProfile(ctx context.Context, name string) error {
	return st.execOne(ctx, "delete profile", name, store.ErrNotFound, `DELETE FROM profiles WHERE name = ?`, name)
}
