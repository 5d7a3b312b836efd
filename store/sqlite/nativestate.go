package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// A native state is stored as the chunks its appends added (rows of
// native_state_chunks keyed by their start offset) and its total size (in
// native_states), so an append writes only its new bytes.

// fence fails with ErrFenced unless epoch is 0 or the lease epoch of stream
// is epoch. Within a write transaction on the one writer it holds until the
// commit: no lease can change in between.
func fence(ctx context.Context, tx *sql.Tx, op, stream string, epoch int64) error {
	if epoch == 0 {
		return nil
	}
	var one int
	err := tx.QueryRowContext(ctx, `SELECT 1 FROM streams WHERE id = ? AND lease_epoch = ?`, stream, epoch).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
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
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	defer tx.Rollback()
	if err := fence(ctx, tx, "append native state", sessionID, epoch); err != nil {
		return 0, err
	}
	var size int64
	err = tx.QueryRowContext(ctx, `SELECT size FROM native_states WHERE session_id = ?`, sessionID).Scan(&size)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	if offset > size {
		return 0, fmt.Errorf("append native state of session %s at %d: %d bytes stored, a gap: %w",
			sessionID, offset, size, store.ErrConflict)
	}
	fresh := data[min(size-offset, int64(len(data))):]
	if len(fresh) == 0 {
		return size, nil // a repeated save: nothing new
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO native_state_chunks (session_id, start, data)
		VALUES (?, ?, ?)`, sessionID, size, fresh); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	size += int64(len(fresh))
	if _, err := tx.ExecContext(ctx, `INSERT INTO native_states (session_id, size) VALUES (?, ?)
		ON CONFLICT (session_id) DO UPDATE SET size = excluded.size`, sessionID, size); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("append native state: %w", err)
	}
	return size, nil
}

// NativeState returns the stored bytes (nil when none), read in one
// statement so that a concurrent append is either all in or not at all.
func (st *Store) NativeState(ctx context.Context, sessionID string) ([]byte, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT data FROM native_state_chunks
		WHERE session_id = ? ORDER BY start`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("read native state: %w", err)
	}
	defer rows.Close()
	var out []byte
	for rows.Next() {
		var chunk sql.RawBytes
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
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("reset native state: %w", err)
	}
	defer tx.Rollback()
	if err := fence(ctx, tx, "reset native state", sessionID, epoch); err != nil {
		return err
	}
	for _, q := range []string{
		`DELETE FROM native_states WHERE session_id = ?`,
		`DELETE FROM native_state_chunks WHERE session_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, sessionID); err != nil {
			return fmt.Errorf("reset native state: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reset native state: %w", err)
	}
	return nil
}
