package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// PutIdempotency stores rec unless its Key exists (a zero CreatedAt is set to
// the current time); it returns the stored record and whether it was already
// there. Of concurrent puts of one key exactly one stores its record: the
// unique key makes the others wait for it and then do nothing.
func (st *Store) PutIdempotency(ctx context.Context, rec store.Idempotency) (store.Idempotency, bool, error) {
	rec.CreatedAt = nowIfZero(rec.CreatedAt).UTC().Truncate(time.Microsecond)
	for {
		tag, err := st.pool.Exec(ctx, `INSERT INTO idempotency (key, request_hash, status, body, created_at, holder)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (key) DO NOTHING`,
			rec.Key, rec.RequestHash, rec.Status, rec.Body, rec.CreatedAt, rec.Holder)
		if err != nil {
			return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return rec, false, nil
		}
		// A separate statement, so that it sees the row the insert met even
		// when that row's transaction committed after the insert began.
		var got store.Idempotency
		err = st.pool.QueryRow(ctx, `SELECT key, request_hash, status, body, created_at, holder
			FROM idempotency WHERE key = $1`, rec.Key).Scan(
			&got.Key, &got.RequestHash, &got.Status, &got.Body, &got.CreatedAt, &got.Holder)
		if errors.Is(err, pgx.ErrNoRows) {
			continue // removed since the insert met it: try again
		}
		if err != nil {
			return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
		}
		got.CreatedAt = got.CreatedAt.UTC()
		return got, true, nil
	}
}

// CompleteIdempotency records the answer (Status and Body) of the stored
// record rec.Key, keeping its CreatedAt; ErrNotFound if it is absent,
// ErrConflict if its RequestHash differs from rec's.
func (st *Store) CompleteIdempotency(ctx context.Context, rec store.Idempotency) error {
	tag, err := st.pool.Exec(ctx, `UPDATE idempotency SET status = $1, body = $2
		WHERE key = $3 AND request_hash = $4`, rec.Status, rec.Body, rec.Key, rec.RequestHash)
	if err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	var exists bool
	if err := st.pool.QueryRow(ctx,
		`SELECT EXISTS (SELECT 1 FROM idempotency WHERE key = $1)`, rec.Key).Scan(&exists); err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	if !exists {
		return fmt.Errorf("complete idempotency %s: %w", rec.Key, store.ErrNotFound)
	}
	return fmt.Errorf("complete idempotency %s: request hash differs: %w", rec.Key, store.ErrConflict)
}

// DeleteIdempotency removes the record key; ErrNotFound if absent.
func (st *Store) DeleteIdempotency(ctx context.Context, key string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM idempotency WHERE key = $1`, key)
	if err != nil {
		return fmt.Errorf("delete idempotency: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete idempotency %s: %w", key, store.ErrNotFound)
	}
	return nil
}

// DeleteIdempotencyBefore removes records created before t.
func (st *Store) DeleteIdempotencyBefore(ctx context.Context, t time.Time) error {
	if _, err := st.pool.Exec(ctx, `DELETE FROM idempotency WHERE created_at < $1`, t); err != nil {
		return fmt.Errorf("delete idempotency: %w", err)
	}
	return nil
}
