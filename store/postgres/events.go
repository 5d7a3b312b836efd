package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// eventLockClass is the first key of the advisory locks that serialize the
// appends to one sandbox's events ("astx" in ASCII); the second is a hash of
// the sandbox id.
const eventLockClass int32 = 0x61737478

// AppendEvent stores e (a zero At is set to the current time) and returns its
// Seq. Appends to one sandbox are serialized by a transaction-scoped advisory
// lock taken before the Seq is drawn, so they commit in Seq order: a reader
// that has seen Seq n of a sandbox never later finds a new event of it below
// n, which makes resuming with afterSeq safe across replicas.
func (st *Store) AppendEvent(ctx context.Context, e store.Event) (int64, error) {
	var seq int64
	err := pgx.BeginFunc(ctx, st.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`,
			eventLockClass, e.SandboxID); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO events (sandbox_id, state, reason, at)
			VALUES ($1, $2, $3, $4) RETURNING seq`,
			e.SandboxID, string(e.State), e.Reason, nowIfZero(e.At)).Scan(&seq)
	})
	if err != nil {
		return 0, fmt.Errorf("append event: %w", err)
	}
	return seq, nil
}

// Events returns the events of a sandbox with Seq > afterSeq, in order.
func (st *Store) Events(ctx context.Context, sandboxID string, afterSeq int64) ([]store.Event, error) {
	rows, err := st.pool.Query(ctx, `SELECT seq, sandbox_id, state, reason, at FROM events
		WHERE sandbox_id = $1 AND seq > $2 ORDER BY seq`, sandboxID, afterSeq)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Event, error) {
		var (
			e     store.Event
			state string
		)
		if err := row.Scan(&e.Seq, &e.SandboxID, &state, &e.Reason, &e.At); err != nil {
			return store.Event{}, err
		}
		e.State = sandbox.State(state)
		e.At = e.At.UTC()
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return out, nil
}
