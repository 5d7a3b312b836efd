package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// inputColumns lists the columns scanInput reads, in its order.
const inputColumns = `id, session_id, turn_id, client_message_id, content, seq, state,
	error, created_at, updated_at`

// scanInput reads one row of inputColumns.
func scanInput(row pgx.Row) (*store.Input, error) {
	var in store.Input
	if err := row.Scan(&in.ID, &in.SessionID, &in.TurnID, &in.ClientMessageID, &in.Content,
		&in.Seq, &in.State, &in.Error, &in.CreatedAt, &in.UpdatedAt); err != nil {
		return nil, err
	}
	in.CreatedAt = in.CreatedAt.UTC()
	in.UpdatedAt = in.UpdatedAt.UTC()
	return &in, nil
}

// AcceptInput records in and appends accepted to the session's log stream
// (unfenced) in one transaction: in.Seq is set to the entry's seq, in.State
// to InputAccepted and zero times to now. When the session already has an
// input with in's non-empty ClientMessageID, nothing is written, in is left
// as it was and the stored input is returned with true. ErrNotFound if the
// session does not exist, ErrConflict if another input has in.ID.
//
// The transaction holds the session's row against deletion, then draws the
// seq, which locks the stream's row until the commit: accepts to one
// session are serialized from there on, so the duplicate check that follows
// sees every input committed before, and of concurrent accepts of one
// ClientMessageID exactly one writes (the others roll their append back,
// leaving no gap).
func (st *Store) AcceptInput(ctx context.Context, in *store.Input, accepted store.LogEntry) (*store.Input, bool, error) {
	rec := *in
	now := time.Now().UTC()
	for _, t := range []*time.Time{&rec.CreatedAt, &rec.UpdatedAt} {
		if t.IsZero() {
			*t = now
		}
	}
	rec.State = store.InputAccepted
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	defer tx.Rollback(ctx)
	var one int
	err = tx.QueryRow(ctx, `SELECT 1 FROM sessions WHERE id = $1 FOR KEY SHARE`, rec.SessionID).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, fmt.Errorf("accept input for session %s: %w", rec.SessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	if rec.Seq, err = appendEntries(ctx, tx, rec.SessionID, 0, []store.LogEntry{accepted}); err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	if rec.ClientMessageID != "" {
		got, err := scanInput(tx.QueryRow(ctx, `SELECT `+inputColumns+` FROM inputs
			WHERE session_id = $1 AND client_message_id = $2`, rec.SessionID, rec.ClientMessageID))
		if err == nil {
			return got, true, nil // the deferred rollback undoes the append
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("accept input: %w", err)
		}
	}
	tag, err := tx.Exec(ctx, `INSERT INTO inputs (`+inputColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (id) DO NOTHING`,
		rec.ID, rec.SessionID, rec.TurnID, rec.ClientMessageID, rec.Content, rec.Seq,
		rec.State, rec.Error, rec.CreatedAt, rec.UpdatedAt)
	if err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return nil, false, fmt.Errorf("accept input %s: %w", rec.ID, store.ErrConflict)
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, fmt.Errorf("accept input: %w", err)
	}
	*in = rec
	return in, false, nil
}

// GetInput returns the input or ErrNotFound.
func (st *Store) GetInput(ctx context.Context, id string) (*store.Input, error) {
	in, err := scanInput(st.pool.QueryRow(ctx, `SELECT `+inputColumns+` FROM inputs WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
	rows, err := st.pool.Query(ctx, `SELECT `+inputColumns+` FROM inputs
		WHERE session_id = $1 AND ($2::text[] IS NULL OR state = ANY($2)) ORDER BY seq`,
		sessionID, anyOf(states))
	if err != nil {
		return nil, fmt.Errorf("list inputs: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Input, error) {
		return scanInput(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list inputs: %w", err)
	}
	return out, nil
}

// SetInputState moves the input to state with errCode (and UpdatedAt to
// now) if its current state is one of from (any when from is empty), in one
// statement, and returns the updated input; ErrConflict if it is in another
// state, ErrNotFound if absent.
func (st *Store) SetInputState(ctx context.Context, id, state, errCode string, from ...string) (*store.Input, error) {
	in, err := scanInput(st.pool.QueryRow(ctx, `UPDATE inputs SET state = $1, error = $2, updated_at = $3
		WHERE id = $4 AND ($5::text[] IS NULL OR state = ANY($5))
		RETURNING `+inputColumns, state, errCode, time.Now().UTC(), id, anyOf(from)))
	if errors.Is(err, pgx.ErrNoRows) {
		var cur string
		err := st.pool.QueryRow(ctx, `SELECT state FROM inputs WHERE id = $1`, id).Scan(&cur)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
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
