package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// PutIdempotency stores rec unless its Key exists (a zero CreatedAt is set to
// the current time); it returns the stored record and whether it was already
// there. Of concurrent puts of one key exactly one stores its record.
func (st *Store) PutIdempotency(ctx context.Context, rec store.Idempotency) (store.Idempotency, bool, error) {
	rec.CreatedAt = fromMicros(micros(nowIfZero(rec.CreatedAt)))
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO idempotency (key, request_hash, status, body, created_at, holder)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING`,
		rec.Key, rec.RequestHash, rec.Status, rec.Body, micros(rec.CreatedAt), rec.Holder)
	if err != nil {
		return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
	}
	if n == 1 {
		if err := tx.Commit(); err != nil {
			return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
		}
		return rec, false, nil
	}
	var (
		got     store.Idempotency
		created int64
	)
	if err := tx.QueryRowContext(ctx, `SELECT key, request_hash, status, body, created_at, holder
		FROM idempotency WHERE key = ?`, rec.Key).Scan(
		&got.Key, &got.RequestHash, &got.Status, &got.Body, &created, &got.Holder); err != nil {
		return store.Idempotency{}, false, fmt.Errorf("put idempotency: %w", err)
	}
	got.CreatedAt = fromMicros(created)
	return got, true, nil
}

// CompleteIdempotency records the answer (Status and Body) of the stored
// record rec.Key, keeping its CreatedAt; ErrNotFound if it is absent,
// ErrConflict if its RequestHash differs from rec's.
func (st *Store) CompleteIdempotency(ctx context.Context, rec store.Idempotency) error {
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE idempotency SET status = ?, body = ?
		WHERE key = ? AND request_hash = ?`, rec.Status, rec.Body, rec.Key, rec.RequestHash)
	if err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	if n == 0 {
		var one int
		err := tx.QueryRowContext(ctx, `SELECT 1 FROM idempotency WHERE key = ?`, rec.Key).Scan(&one)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("complete idempotency %s: %w", rec.Key, store.ErrNotFound)
		case err != nil:
			return fmt.Errorf("complete idempotency: %w", err)
		}
		return fmt.Errorf("complete idempotency %s: request hash differs: %w", rec.Key, store.ErrConflict)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("complete idempotency: %w", err)
	}
	return nil
}

// DeleteIdempotency removes the record key; ErrNotFound if absent.
func (st *Store) DeleteIdempotency(ctx context.Context, key string) error {
	return st.execOne(ctx, "delete idempotency", key, store.ErrNotFound, `DELETE FROM idempotency WHERE key = ?`, key)
}

// DeleteIdempotencyBefore removes records created before t.
func (st *Store) DeleteIdempotencyBefore(ctx context.Context, t time.Time) error {
	if _, err := st.w.ExecContext(ctx, `DELETE FROM idempotency WHERE created_at < ?`, micros(t)); err != nil {
		return fmt.Errorf("delete idempotency: %w", err)
	}
	return nil
}
