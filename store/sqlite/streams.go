package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// Append adds entries to the stream (creating it if absent) with the next
// seqs, in one transaction, and returns the seq of the first (with no
// entries, the seq the next entry will get). With epoch > 0 it is fenced:
// ErrFenced unless the stream's lease epoch equals epoch. Zero At fields are
// set to now. Every write goes through the one writer connection, so appends
// commit in seq order and a reader never sees a later seq before an earlier.
func (st *Store) Append(ctx context.Context, stream string, epoch int64, entries []store.LogEntry) (int64, error) {
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	defer tx.Rollback()
	first, err := appendEntries(ctx, tx, stream, epoch, entries)
	if err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	return first, nil
}

// appendEntries is Append within tx, which the caller commits. The streams
// row is fenced and its next_seq advanced past the entries (and its
// max_source raised to theirs) in one statement, so a stale epoch writes
// nothing and the seqs have no gaps.
func appendEntries(ctx context.Context, tx *sql.Tx, stream string, epoch int64, entries []store.LogEntry) (int64, error) {
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
		err = tx.QueryRowContext(ctx, `INSERT INTO streams (id, next_seq, max_source) VALUES (?1, 1 + ?2, ?3)
			ON CONFLICT (id) DO UPDATE SET next_seq = next_seq + ?2, max_source = max(max_source, ?3)
			RETURNING next_seq`, stream, k, source).Scan(&next)
	} else {
		err = tx.QueryRowContext(ctx, `UPDATE streams SET next_seq = next_seq + ?1,
			max_source = max(max_source, ?2) WHERE id = ?3 AND lease_epoch = ?4
			RETURNING next_seq`, k, source, stream, epoch).Scan(&next)
	}
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("append to stream %s with epoch %d: %w", stream, epoch, store.ErrFenced)
	}
	if err != nil {
		return 0, fmt.Errorf("append to stream: %w", err)
	}
	first := next - k
	for i, e := range entries {
		if _, err := tx.ExecContext(ctx, `INSERT INTO stream_entries
			(stream, seq, type, turn_id, input_id, message_id, payload, source, at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, stream, first+int64(i), e.Type, e.TurnID,
			e.InputID, e.MessageID, []byte(e.Payload), e.Source, micros(nowIfZero(e.At))); err != nil {
			return 0, fmt.Errorf("append to stream: %w", err)
		}
	}
	return first, nil
}

// ReadStream returns up to limit entries with Seq > afterSeq in order
// (limit <= 0: all); none for an unknown stream.
func (st *Store) ReadStream(ctx context.Context, stream string, afterSeq, limit int64) ([]store.LogEntry, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT seq, type, turn_id, input_id, message_id, payload, source, at
		FROM stream_entries WHERE stream = ? AND seq > ? ORDER BY seq LIMIT ?`,
		stream, afterSeq, sqlLimit(limit))
	if err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	defer rows.Close()
	var out []store.LogEntry
	for rows.Next() {
		var (
			e       store.LogEntry
			payload []byte
			at      int64
		)
		if err := rows.Scan(&e.Seq, &e.Type, &e.TurnID, &e.InputID, &e.MessageID, &payload, &e.Source, &at); err != nil {
			return nil, fmt.Errorf("read stream: %w", err)
		}
		e.Payload, e.At = payload, fromMicros(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read stream: %w", err)
	}
	return out, nil
}

// StreamHead returns the stream's last seq (0 when empty or unknown).
func (st *Store) StreamHead(ctx context.Context, stream string) (int64, error) {
	var head int64
	err := st.r.QueryRowContext(ctx, `SELECT next_seq - 1 FROM streams WHERE id = ?`, stream).Scan(&head)
	if errors.Is(err, sql.ErrNoRows) {
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
	err := st.r.QueryRowContext(ctx, `SELECT max_source FROM streams WHERE id = ?`, stream).Scan(&source)
	if errors.Is(err, sql.ErrNoRows) {
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
		FROM stream_entries WHERE stream = ? AND type = ? AND seq <= ? ORDER BY seq DESC LIMIT 1`, stream, typ, atOrBefore)
}

// NextOfType returns the stream's first entry of type typ with Seq >
// after (ok false when none), one row through stream_entries_type_idx.
func (st *Store) NextOfType(ctx context.Context, stream, typ string, after int64) (store.LogEntry, bool, error) {
	return st.entryOfType(ctx, `SELECT seq, type, turn_id, input_id, message_id, payload, source, at
		FROM stream_entries WHERE stream = ? AND type = ? AND seq > ? ORDER BY seq LIMIT 1`, stream, typ, after)
}

// entryOfType runs query, which selects at most one entry.
func (st *Store) entryOfType(ctx context.Context, query string, args ...any) (store.LogEntry, bool, error) {
	var (
		e       store.LogEntry
		payload []byte
		at      int64
	)
	err := st.r.QueryRowContext(ctx, query, args...).Scan(&e.Seq, &e.Type, &e.TurnID, &e.InputID, &e.MessageID, &payload, &e.Source, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return store.LogEntry{}, false, nil
	}
	if err != nil {
		return store.LogEntry{}, false, fmt.Errorf("find stream entry: %w", err)
	}
	e.Payload, e.At = payload, fromMicros(at)
	return e, true, nil
}

// DeleteSandboxStreamsBefore deletes the streams of sandboxes without a
// record whose last entry is older than before (see store.Streams).
func (st *Store) DeleteSandboxStreamsBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("delete sandbox streams: %w", err)
	}
	defer tx.Rollback()
	// The range on the primary key selects the prefix (';' follows ':').
	rows, err := tx.QueryContext(ctx, `SELECT s.id FROM streams s
		WHERE s.id >= ?1 AND s.id < ?2
		AND NOT EXISTS (SELECT 1 FROM sandboxes b WHERE b.id = substr(s.id, ?3))
		AND COALESCE((SELECT e.at FROM stream_entries e WHERE e.stream = s.id ORDER BY e.seq DESC LIMIT 1), 0) < ?4
		LIMIT ?5`, store.SandboxStreamPrefix, prefixEnd(store.SandboxStreamPrefix), len(store.SandboxStreamPrefix)+1,
		micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete sandbox streams: %w", err)
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("delete sandbox streams: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("delete sandbox streams: %w", err)
	}
	for _, id := range ids {
		for _, q := range []string{`DELETE FROM stream_entries WHERE stream = ?`, `DELETE FROM streams WHERE id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return 0, fmt.Errorf("delete sandbox streams: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("delete sandbox streams: %w", err)
	}
	return int64(len(ids)), nil
}

// prefixEnd is the least string greater than every string with prefix p
// (p's last byte incremented; p ends below 0xff).
func prefixEnd(p string) string { return p[:len(p)-1] + string(p[len(p)-1]+1) }
