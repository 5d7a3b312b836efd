package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// Append adds entries to the stream (creating it if absent) with the next
// seqs, in one transaction, and returns the seq of the first (with no
// entries, the seq the next entry will get). With epoch > 0 it is fenced:
// ErrFenced unless the stream's lease epoch equals epoch. Zero At fields are
// set to now.
//
// The statement that draws the seqs locks the stream's row until the
// commit, so appends to one stream commit in seq order: a reader that has
// seen seq n never later finds a new entry at or below n, across replicas.
func (st *Store) Append(ctx context.Context, stream string, epoch int64, entries []store.LogEntry) (int64, error) {
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	defer tx.Rollback(ctx)
	first, err := appendEntries(ctx, tx, stream, epoch, entries)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	return first, nil
}

// appendEntries is Append within tx, which the caller commits. The streams
// row is fenced and its next_seq advanced past the entries (and its
// max_source raised to theirs) in one statement, so a stale epoch writes
// nothing and, a rolled back append undoing its advance, the seqs have no
// gaps.
func appendEntries(ctx context.Context, tx pgx.Tx, stream string, epoch int64, entries []store.LogEntry) (int64, error) {
	k := int64(len(entries))
	var source int64
	for _, e := range entries {
		source = max(source, e.Source)
	}
	var (
		next int64
		err  error
	)
	if epoch == 0 {
		err = tx.QueryRow(ctx, `INSERT INTO streams AS s (id, next_seq, max_source)
			VALUES ($1, 1 + $2::bigint, $3)
			ON CONFLICT (id) DO UPDATE SET next_seq = s.next_seq + $2::bigint,
				max_source = GREATEST(s.max_source, $3)
			RETURNING next_seq`, stream, k, source).Scan(&next)
	} else {
		err = tx.QueryRow(ctx, `UPDATE streams SET next_seq = next_seq + $1::bigint,
			max_source = GREATEST(max_source, $2) WHERE id = $3 AND lease_epoch = $4
			RETURNING next_seq`, k, source, stream, epoch).Scan(&next)
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("append to stream %s with epoch %d: %w", stream, epoch, store.ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	first := next - k
	if k == 0 {
		return first, nil
	}
	var (
		types    = make([]string, k)
		turns    = make([]string, k)
		inputs   = make([]string, k)
		messages = make([]string, k)
		payloads = make([][]byte, k)
		sources  = make([]int64, k)
		ats      = make([]time.Time, k)
	)
	for i, e := range entries {
		types[i], turns[i], inputs[i], messages[i] = e.Type, e.TurnID, e.InputID, e.MessageID
		payloads[i], sources[i], ats[i] = e.Payload, e.Source, nowIfZero(e.At)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO stream_entries
		(stream, seq, type, turn_id, input_id, message_id, payload, source, at)
		SELECT $1, $2::bigint + e.n - 1, e.type, e.turn_id, e.input_id, e.message_id,
			e.payload, e.source, e.at
		FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::bytea[],
			$8::bigint[], $9::timestamptz[]) WITH ORDINALITY
			AS e (type, turn_id, input_id, message_id, payload, source, at, n)`,
		stream, first, types, turns, inputs, messages, payloads, sources, ats); err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	return first, nil
}

// ReadStream returns up to limit entries with Seq > afterSeq in order
// (limit <= 0: all); none for an unknown stream.
func (st *Store) ReadStream(ctx context.Context, stream string, afterSeq, limit int64) ([]store.LogEntry, error) {
	rows, err := st.pool.Query(ctx, `SELECT seq, type, turn_id, input_id, message_id, payload, source, at
		FROM stream_entries WHERE stream = $1 AND seq > $2 ORDER BY seq LIMIT $3`,
		stream, afterSeq, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.LogEntry, error) {
		var (
			e       store.LogEntry
			payload []byte
		)
		if err := row.Scan(&e.Seq, &e.Type, &e.TurnID, &e.InputID, &e.MessageID, &payload, &e.Source, &e.At); err != nil {
			return store.LogEntry{}, err
		}
		e.Payload, e.At = payload, e.At.UTC()
		return e, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	return out, nil
}

// StreamHead returns the stream's last seq (0 when empty or unknown).
func (st *Store) StreamHead(ctx context.Context, stream string) (int64, error) {
	var head int64
	err := st.pool.QueryRow(ctx, `SELECT next_seq - 1 FROM streams WHERE id = $1`, stream).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("stream head: %w", err)
	}
	return head, nil
}

// LastSource returns the largest Source of the stream's entries (0 when
// none has one), which appends keep on the stream's row.
func (st *Store) LastSource(ctx context.Context, stream string) (int64, error) {
	var source int64
	err := st.pool.QueryRow(ctx, `SELECT max_source FROM streams WHERE id = $1`, stream).Scan(&source)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("last source: %w", err)
	}
	return source, nil
}

// LastOfType returns the stream's last entry of type typ with Seq <=
// atOrBefore (ok false when none), one row through
// stream_entries_type_idx.
func (st *Store) LastOfType(ctx context.Context, stream, typ string, atOrBefore int64) (store.LogEntry, bool, error) {
	return st.entryOfType(ctx, `SELECT seq, type, turn_id, input_id, message_id, payload, source, at
		FROM stream_entries WHERE stream = $1 AND type = $2 AND seq <= $3 ORDER BY seq DESC LIMIT 1`, stream, typ, atOrBefore)
}

// NextOfType returns the stream's first entry of type typ with Seq >
// after (ok false when none), one row through stream_entries_type_idx.
func (st *Store) NextOfType(ctx context.Context, stream, typ string, after int64) (store.LogEntry, bool, error) {
	return st.entryOfType(ctx, `SELECT seq, type, turn_id, input_id, message_id, payload, source, at
		FROM stream_entries WHERE stream = $1 AND type = $2 AND seq > $3 ORDER BY seq LIMIT 1`, stream, typ, after)
}

// entryOfType runs query, which selects at most one entry.
func (st *Store) entryOfType(ctx context.Context, query string, args ...any) (store.LogEntry, bool, error) {
	var (
		e       store.LogEntry
		payload []byte
	)
	err := st.pool.QueryRow(ctx, query, args...).Scan(&e.Seq, &e.Type, &e.TurnID, &e.InputID, &e.MessageID, &payload, &e.Source, &e.At)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.LogEntry{}, false, nil
	}
	if err != nil {
		return store.LogEntry{}, false, fmt.Errorf("find stream entry: %w", err)
	}
	e.Payload, e.At = payload, e.At.UTC()
	return e, true, nil
}

// DeleteSandboxStreamsBefore deletes the streams of sandboxes without a
// record whose last entry is older than before (see store.Streams).
func (st *Store) DeleteSandboxStreamsBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	var lim any // NULL: no limit
	if limit > 0 {
		lim = limit
	}
	var n int64
	// The range on the primary key selects the prefix (';' follows ':').
	err := st.pool.QueryRow(ctx, `WITH gone AS (
			SELECT s.id FROM streams s
			WHERE s.id >= $1 AND s.id < $2
			AND NOT EXISTS (SELECT 1 FROM sandboxes b WHERE b.id = substr(s.id, $3))
			AND COALESCE((SELECT e.at FROM stream_entries e WHERE e.stream = s.id ORDER BY e.seq DESC LIMIT 1), '-infinity') < $4
			LIMIT $5),
		entries AS (DELETE FROM stream_entries WHERE stream IN (SELECT id FROM gone)),
		streams AS (DELETE FROM streams WHERE id IN (SELECT id FROM gone) RETURNING 1)
		SELECT count(*) FROM streams`,
		store.SandboxStreamPrefix, prefixEnd(store.SandboxStreamPrefix), len(store.SandboxStreamPrefix)+1, before, lim).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("delete sandbox streams: %w", err)
	}
	return n, nil
}

// prefixEnd is the least string greater than every string with prefix p
// (p's last byte incremented; p ends below 0xff).
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }
