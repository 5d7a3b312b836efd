package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// SetOwner records o unless its record has an owner; nil when recorded or
// already o.OwnerID's (the stored record is written back), ErrConflict for
// another owner.
func (st *Store) SetOwner(ctx context.Context, o *store.ResourceOwner) error {
	o.CreatedAt = fromMicros(micros(nowIfZero(o.CreatedAt)))
	for {
		res, err := st.w.ExecContext(ctx, `INSERT INTO resource_owners (kind, backend, name, owner_id, org_id, created_at)
			VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
			o.Kind, o.Backend, o.Name, o.OwnerID, o.OrgID, micros(o.CreatedAt))
		if err != nil {
			return fmt.Errorf("set owner: %w", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("set owner: %w", err)
		} else if n == 1 {
			return nil
		}
		got, err := st.getOwner(ctx, st.w, o.Kind, o.Backend, o.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue // deleted meanwhile: insert again
		}
		if err != nil {
			return fmt.Errorf("set owner: %w", err)
		}
		if got.OwnerID != o.OwnerID {
			return fmt.Errorf("set owner: %s %q is another user's: %w", o.Kind, o.Name, store.ErrConflict)
		}
		*o = *got
		return nil
	}
}

// GetOwner returns the owner of (kind, backend, name) or ErrNotFound.
func (st *Store) GetOwner(ctx context.Context, kind, backend, name string) (*store.ResourceOwner, error) {
	o, err := st.getOwner(ctx, st.r, kind, backend, name)
	if err != nil {
		return nil, fmt.Errorf("get owner: %w", err)
	}
	return o, nil
}

func (st *Store) getOwner(ctx context.Context, db *sql.DB, kind, backend, name string) (*store.ResourceOwner, error) {
	var (
		o       store.ResourceOwner
		created int64
	)
	err := db.QueryRowContext(ctx, `SELECT kind, backend, name, owner_id, org_id, created_at
		FROM resource_owners WHERE kind = ? AND backend = ? AND name = ?`, kind, backend, name).
		Scan(&o.Kind, &o.Backend, &o.Name, &o.OwnerID, &o.OrgID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	o.CreatedAt = fromMicros(created)
	return &o, nil
}

// ListOwned returns the records of kind owned by ownerID ("" for all), by
// backend then name.
func (st *Store) ListOwned(ctx context.Context, kind, ownerID string) ([]*store.ResourceOwner, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT kind, backend, name, owner_id, org_id, created_at
		FROM resource_owners WHERE kind = ? AND (? = '' OR owner_id = ?) ORDER BY backend, name`, kind, ownerID, ownerID)
	if err != nil {
		return nil, fmt.Errorf("list owned: %w", err)
	}
	defer rows.Close()
	out := []*store.ResourceOwner{}
	for rows.Next() {
		var (
			o       store.ResourceOwner
			created int64
		)
		if err := rows.Scan(&o.Kind, &o.Backend, &o.Name, &o.OwnerID, &o.OrgID, &created); err != nil {
			return nil, fmt.Errorf("list owned: %w", err)
		}
		o.CreatedAt = fromMicros(created)
		out = append(out, &o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list owned: %w", err)
	}
	return out, nil
}

// DeleteOwner forgets the owner of (kind, backend, name); ErrNotFound if
// none is recorded.
func (st *Store) DeleteOwner(ctx context.Context, kind, backend, name string) error {
	res, err := st.w.ExecContext(ctx, `DELETE FROM resource_owners WHERE kind = ? AND backend = ? AND name = ?`, kind, backend, name)
	if err != nil {
		return fmt.Errorf("delete owner: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete owner: %w", err)
	} else if n == 0 {
		return fmt.Errorf("delete owner: %w", store.ErrNotFound)
	}
	return nil
}
