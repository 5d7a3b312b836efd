package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

const ownerColumns = `kind, backend, name, owner_id, org_id, created_at`

func scanOwner(row pgx.Row) (*store.ResourceOwner, error) {
	var o store.ResourceOwner
	if err := row.Scan(&o.Kind, &o.Backend, &o.Name, &o.OwnerID, &o.OrgID, &o.CreatedAt); err != nil {
		return nil, err
	}
	o.CreatedAt = o.CreatedAt.UTC()
	return &o, nil
}

// SetOwner records o unless its record has an owner; nil when recorded or
// already o.OwnerID's (the stored record is written back), ErrConflict for
// another owner.
func (st *Store) SetOwner(ctx context.Context, o *store.ResourceOwner) error {
	o.CreatedAt = nowIfZero(o.CreatedAt).Truncate(time.Microsecond).UTC()
	for {
		tag, err := st.pool.Exec(ctx, `INSERT INTO resource_owners (`+ownerColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
			o.Kind, o.Backend, o.Name, o.OwnerID, o.OrgID, o.CreatedAt)
		if err != nil {
			return fmt.Errorf("set owner: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return nil
		}
		// The statement after the insert sees the row that made it do
		// nothing, unless that row was deleted meanwhile: insert again.
		got, err := st.getOwner(ctx, o.Kind, o.Backend, o.Name)
		if errors.Is(err, store.ErrNotFound) {
			continue
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
	o, err := st.getOwner(ctx, kind, backend, name)
	if err != nil {
		return nil, fmt.Errorf("get owner: %w", err)
	}
	return o, nil
}

func (st *Store) getOwner(ctx context.Context, kind, backend, name string) (*store.ResourceOwner, error) {
	o, err := scanOwner(st.pool.QueryRow(ctx, `SELECT `+ownerColumns+`
		FROM resource_owners WHERE kind = $1 AND backend = $2 AND name = $3`, kind, backend, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return o, err
}

// ListOwned returns the records of kind owned by ownerID ("" for all), by
// backend then name.
func (st *Store) ListOwned(ctx context.Context, kind, ownerID string) ([]*store.ResourceOwner, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+ownerColumns+` FROM resource_owners
		WHERE kind = $1 AND ($2 = '' OR owner_id = $2) ORDER BY backend, name`, kind, ownerID)
	if err != nil {
		return nil, fmt.Errorf("list owned: %w", err)
	}
	defer rows.Close()
	out := []*store.ResourceOwner{}
	for rows.Next() {
		o, err := scanOwner(rows)
		if err != nil {
			return nil, fmt.Errorf("list owned: %w", err)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list owned: %w", err)
	}
	return out, nil
}

// DeleteOwner forgets the owner of (kind, backend, name); ErrNotFound if
// none is recorded.
func (st *Store) DeleteOwner(ctx context.Context, kind, backend, name string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM resource_owners WHERE kind = $1 AND backend = $2 AND name = $3`, kind, backend, name)
	if err != nil {
		return fmt.Errorf("delete owner: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete owner: %w", store.ErrNotFound)
	}
	return nil
}
