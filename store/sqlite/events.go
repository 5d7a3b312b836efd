package sqlite

import (
	"context"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// AppendEvent stores e (a zero At is set to the current time) and returns its
// Seq. Seqs are never reused, and since every write goes through one
// connection they commit in Seq order: a reader that has seen Seq n never
// later finds a new event below n.
func (st *Store) AppendEvent(ctx context.Context, e store.Event) (int64, error) {
	var seq int64
	err := st.w.QueryRowContext(ctx, `INSERT INTO events (sandbox_id, state, reason, at)
		VALUES (?, ?, ?, ?) RETURNING seq`,
		e.SandboxID, string(e.State), e.Reason, micros(nowIfZero(e.At))).Scan(&seq)
	if err != nil {
		return 0, fmt.Errorf("append event: %w", err)
	}
	return seq, nil
}

// Events returns the events of a sandbox with Seq > afterSeq, in order.
func (st *Store) Events(ctx context.Context, sandboxID string, afterSeq int64) ([]store.Event, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT seq, sandbox_id, state, reason, at FROM events
		WHERE sandbox_id = ? AND seq > ? ORDER BY seq`, sandboxID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		var (
			e     store.Event
			state string
			at    int64
		)
		if err := rows.Scan(&e.Seq, &e.SandboxID, &state, &e.Reason, &at); err != nil {
			return nil, fmt.Errorf("list events: %w", err)
		}
		e.State = sandbox.State(state)
		e.At = fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}
