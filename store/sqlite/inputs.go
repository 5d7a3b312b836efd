package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// inputColumns lists the columns scanInput reads, in its order.
const inputColumns = `id, session_id, turn_id, client_message_id, content, seq, state,
	error, created_at, updated_at`

// scanInput reads one row of inputColumns.
func scanInput(row rowScanner) (*store.Input, error) {
	var (
		in               store.Input
		created, updated int64
	)
	if err := row.Scan(&in.ID, &in.SessionID, &in.TurnID, &in.ClientMessageID, &in.Content,
		&in.Seq, &in.State, &in.Error, &created, &updated); err != nil {
		return nil, err
	}
	in.CreatedAt = fromMicros(created)
	in.UpdatedAt = fromMicros(updated)
	return &in, nil
}

// AcceptInput records in and appends accepted to the session's log stream
// (unfenced) in one write transaction: in.Seq is set to the entry's seq,
// in.State to InputAccepted and zero times to now. When the session already
// has an input with in's non-empty ClientMessageID, nothing is written, in
// is left as it was and the stored input is returned with true; transactions
// on the one writer connection never interleave, so of concurrent accepts
// exactly one writes. ErrNotFound if the session does not exist,
// ErrConflict if another input has in.ID.
func (st *Store) AcceptInput(ctx context.Context, in *store.Input, accepted store.LogEntry) (*store.Input, bool, error) {
	rec := *in
	now := time.Now().UTC()
	for _, t := range []*time.Time{&rec.CreatedAt, &rec.UpdatedAt} {
		if t.IsZero() {
			*t = now
		}
	}
	rec.State = store.InputAccepted
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	defer tx.Rollback()
	var one int
	err = tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, rec.SessionID).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, fmt.Errorf("accept input for session %s: %w", rec.SessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	if rec.ClientMessageID != "" {
		got, err := scanInput(tx.QueryRowContext(ctx, `SELECT `+inputColumns+` FROM inputs
			WHERE session_id = ? AND client_message_id = ?`, rec.SessionID, rec.ClientMessageID))
		if err == nil {
			return got, true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("accept input: %w", err)
		}
	}
	if rec.Seq, err = appendEntries(ctx, tx, rec.SessionID, 0, []store.LogEntry{accepted}); err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO inputs (`+inputColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		rec.ID, rec.SessionID, rec.TurnID, rec.ClientMessageID, rec.Content, rec.Seq,
		rec.State, rec.Error, micros(rec.CreatedAt), micros(rec.UpdatedAt))
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	} else if n == 0 {
		return nil, false, fmt.Errorf("accept input %s: %w", rec.ID, store.ErrConflict)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	*in = rec
	return in, false, nil
}

// GetInput returns the input or ErrNotFound.
func (st *Store) GetInput(ctx context.Context, id string) (*store.Input, error) {
	in, err := scanInput(st.r.QueryRowContext(ctx, `SELECT `+inputColumns+` FROM inputs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get input %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get input: %w", err)
	}
	return in, nil
}

// ListInputs returns the session's inputs in one of states (all when none
// given), ordered by Seq.
func (st *Store) ListInputs(ctx context.Context, sessionID string, states ...string) ([]*store.Input, error) {
	q := `SELECT ` + inputColumns + ` FROM inputs WHERE session_id = ?`
	args := []any{sessionID}
	if len(states) > 0 {
		cond, stateArgs := inStrings("state", states)
		q += " AND " + cond
		args = append(args, stateArgs...)
	}
	return queryAll(ctx, st.r, "list inputs", scanInput, q+` ORDER BY seq`, args...)
}

// SetInputState moves the input to state with errCode (and UpdatedAt to
// now) if its current state is one of from (any when from is empty), in one
// statement, and returns the updated input; ErrConflict if it is in another
// state, ErrNotFound if absent.
func (st *Store) SetInputState(ctx context.Context, id, state, errCode string, from ...string) (*store.Input, error) {
	q := `UPDATE inputs SET state = ?, error = ?, updated_at = ? WHERE id = ?`
	args := []any{state, errCode, micros(time.Now()), id}
	if len(from) > 0 {
		cond, fromArgs := inStrings("state", from)
		q += " AND " + cond
		args = append(args, fromArgs...)
	}
	in, err := scanInput(st.w.QueryRowContext(ctx, q+` RETURNING `+inputColumns, args...))
	if errors.Is(err, sql.ErrNoRows) {
		var cur string
		err := st.w.QueryRowContext(ctx, `SELECT state FROM inputs WHERE id = ?`, id).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return nil, fmt.Errorf("set state of input %s: %w", id, store.ErrNotFound)
		case err != nil:
			return nil, fmt.Errorf("set input state: %w", err)
		}
		return nil, fmt.Errorf("set state of input %s to %s: it is %s, not one of %v: %w",
			id, state, cur, from, store.ErrConflict)
	}
	if err != nil {
		return nil, fmt.Errorf("set input state: %w", err)
	}
	return in, nil
}
