package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// A native state is stored as the chunks its appends added (rows of
// native_state_chunks keyed by their start offset) and its total size (in
// native_states), so an append writes only its new bytes. The size row is
// the state's lock: writers take it first.

// fence fails with ErrFenced unless epoch is 0 or the lease epoch of stream
// is epoch. It share-locks the stream's row until tx ends, so the lease
// cannot change before the fenced write commits: a new holder's acquire
// waits for it.
func fence(ctx context.Context, tx pgx.Tx, op, stream string, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM streams WHERE id = $1 AND lease_epoch = $2 FOR SHARE`,
		stream, epoch).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s of session %s with epoch %d: %w", op, stream, epoch, store.ErrFenced)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// AppendNativeState stores data at offset of the session's native state,
// fenced by the epoch of the session's stream lease (0: unfenced). Bytes
// below the stored size are skipped as a repeated save; an offset above it
// is a gap: ErrConflict. It returns the stored size afterwards.
func (st *Store) AppendNativeState(ctx context.Context, sessionID string, epoch, offset int64, data []byte) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("append native state of session %s: negative offset %d", sessionID, offset)
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := fence(ctx, tx, "append native state", sessionID, epoch); err != nil {
		return 0, err
	}
	// Lock the size row, creating it (size 0) if absent.
	var size int64
	if err := tx.QueryRow(ctx, `INSERT INTO native_states AS n (session_id, size) VALUES ($1, 0)
		ON CONFLICT (session_id) DO UPDATE SET size = n.size RETURNING size`, sessionID).Scan(&size); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	if offset > size {
		return 0, fmt.Errorf("append native state of session %s at %d: %d bytes stored, a gap: %w",
			sessionID, offset, size, store.ErrConflict)
	}
	fresh := data[min(size-offset, int64(len(data))):]
	if len(fresh) == 0 {
		return size, nil // a repeated save: nothing new; the rollback drops the lock
	}
	if _, err := tx.Exec(ctx, `INSERT INTO native_state_chunks (session_id, start, data)
		VALUES ($1, $2, $3)`, sessionID, size, fresh); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	size += int64(len(fresh))
	if _, err := tx.Exec(ctx, `UPDATE native_states SET size = $2 WHERE session_id = $1`, sessionID, size); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	return size, nil
}

// NativeState returns the stored bytes (nil when none), read in one
// statement, whose snapshot holds a committed append whole or not at all.
func (st *Store) NativeState(ctx context.Context, sessionID string) ([]byte, error) {
	rows, err := st.pool.Query(ctx, `SELECT data FROM native_state_chunks
		WHERE session_id = $1 ORDER BY start`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read native state: %w", err)
	}
	defer rows.Close()
	var out []byte
	for rows.Next() {
		var chunk []byte
		if err := rows.Scan(&chunk); err != nil {
			return nil, fmt.Errorf("read native state: %w", err)
		}
		out = append(out, chunk...)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read native state: %w", err)
	}
	return out, nil
}

// ResetNativeState drops the stored bytes, fenced as AppendNativeState.
func (st *Store) ResetNativeState(ctx context.Context, sessionID string, epoch int64) error {
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("reset native state: %w", err)
	}
	defer tx.Rollback(ctx)
	if err := fence(ctx, tx, "reset native state", sessionID, epoch); err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM native_states WHERE session_id = $1`,
		`DELETE FROM native_state_chunks WHERE session_id = $1`,
	} {
		if _, err := tx.Exec(ctx, q, sessionID); err != nil {
			return fmt.Errorf("reset native state: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("reset native state: %w", err)
	}
	return nil
}
