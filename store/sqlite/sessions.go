package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/astrabox/astrabox/store"
)

// sessionColumns lists the columns scanSession reads, in its order.
const sessionColumns = `id, agent_id, engine_kind, state, title, current_turn_id,
	pending_interaction, answer, interrupt_requested_at, sandbox_id, runtime, native_key,
	owner_id, org_id, created_at, updated_at, last_active_at, version`

// scanSession reads one row of sessionColumns.
func scanSession(row rowScanner) (*store.Session, error) {
	var (
		s                            store.Session
		pending, answer, runtime     []byte
		interrupt                    sql.NullInt64
		created, updated, lastActive int64
	)
	if err := row.Scan(&s.ID, &s.AgentID, &s.EngineKind, &s.State, &s.Title, &s.CurrentTurnID,
		&pending, &answer, &interrupt, &s.SandboxID, &runtime, &s.NativeKey, &s.OwnerID, &s.OrgID,
		&created, &updated, &lastActive, &s.Version); err != nil {
		return nil, err
	}
	s.PendingInteraction, s.Answer, s.Runtime = pending, answer, runtime
	s.InterruptRequestedAt = fromNullMicros(interrupt)
	s.CreatedAt = fromMicros(created)
	s.UpdatedAt = fromMicros(updated)
	s.LastActiveAt = fromMicros(lastActive)
	return &s, nil
}

// CreateSession inserts s with Version 1 (zero times set to now in s) and
// creates its log stream, empty with epoch 0, in one transaction; a stream
// of that name that exists already is kept. ErrConflict if the id exists.
func (st *Store) CreateSession(ctx context.Context, s *store.Session) error {
	now := time.Now().UTC()
	for _, t := range []*time.Time{&s.CreatedAt, &s.UpdatedAt, &s.LastActiveAt} {
		if t.IsZero() {
			*t = now
		}
	}
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `INSERT INTO sessions (`+sessionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT (id) DO NOTHING`,
		s.ID, s.AgentID, s.EngineKind, s.State, s.Title, s.CurrentTurnID,
		[]byte(s.PendingInteraction), []byte(s.Answer), nullMicros(s.InterruptRequestedAt), s.SandboxID, []byte(s.Runtime), s.NativeKey,
		s.OwnerID, s.OrgID, micros(s.CreatedAt), micros(s.UpdatedAt), micros(s.LastActiveAt))
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("create session: %w", err)
	} else if n == 0 {
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrConflict)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO streams (id, next_seq) VALUES (?, 1)
		ON CONFLICT (id) DO NOTHING`, s.ID); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.Version = 1
	return nil
}

// GetSession returns the record or ErrNotFound.
func (st *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	s, err := scanSession(st.r.QueryRowContext(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get session %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

// UpdateSession replaces the record if its stored Version equals s.Version,
// then increments s.Version; a zero UpdatedAt is set to now. CreatedAt,
// OwnerID and OrgID keep the stored values, which are written back into s.
// ErrConflict on another version, ErrNotFound if absent.
func (st *Store) UpdateSession(ctx context.Context, s *store.Session) error {
	updated := nowIfZero(s.UpdatedAt)
	var (
		created    int64
		owner, org string
	)
	err := st.w.QueryRowContext(ctx, `UPDATE sessions SET agent_id = ?, engine_kind = ?,
		state = ?, title = ?, current_turn_id = ?, pending_interaction = ?, answer = ?,
		interrupt_requested_at = ?, sandbox_id = ?, runtime = ?, native_key = ?, updated_at = ?,
		last_active_at = ?, version = version + 1
		WHERE id = ? AND version = ? RETURNING created_at, owner_id, org_id`,
		s.AgentID, s.EngineKind, s.State, s.Title, s.CurrentTurnID, []byte(s.PendingInteraction),
		[]byte(s.Answer), nullMicros(s.InterruptRequestedAt), s.SandboxID, []byte(s.Runtime), s.NativeKey, micros(updated), micros(s.LastActiveAt),
		s.ID, s.Version).Scan(&created, &owner, &org)
	if errors.Is(err, sql.ErrNoRows) {
		return st.missOrConflict(ctx, "update session", `SELECT 1 FROM sessions WHERE id = ?`, s.ID, s.Version)
	}
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	s.CreatedAt, s.UpdatedAt = fromMicros(created), updated
	s.OwnerID, s.OrgID = owner, org
	s.Version++
	return nil
}

// DeleteSession removes the record with its inputs (by the foreign key's
// cascade), its log stream with its lease and its native state, in one
// transaction; ErrNotFound if absent.
func (st *Store) DeleteSession(ctx context.Context, id string) error {
	tx, err := st.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("delete session: %w", err)
	} else if n == 0 {
		return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
	}
	for _, q := range []string{
		`DELETE FROM streams WHERE id = ?`,
		`DELETE FROM stream_entries WHERE stream = ?`,
		`DELETE FROM native_states WHERE session_id = ?`,
		`DELETE FROM native_state_chunks WHERE session_id = ?`,
	} {
		if _, err := tx.ExecContext(ctx, q, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// ListSessions returns the records matching f ordered by ID.
func (st *Store) ListSessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	conds := []string{"id > ?"}
	args := []any{f.AfterID}
	if f.AgentID != "" {
		conds = append(conds, "agent_id = ?")
		args = append(args, f.AgentID)
	}
	if f.OwnerID != "" {
		conds = append(conds, "owner_id = ?")
		args = append(args, f.OwnerID)
	}
	if len(f.States) > 0 {
		cond, stateArgs := inStrings("state", f.States)
		conds = append(conds, cond)
		args = append(args, stateArgs...)
	}
	return queryAll(ctx, st.r, "list sessions", scanSession, `SELECT `+sessionColumns+` FROM sessions
		WHERE `+strings.Join(conds, " AND ")+` ORDER BY id LIMIT ?`,
		append(args, sqlLimit(int64(f.Limit)))...)
}

// CountSessions returns how many Sessions are in each state.
func (st *Store) CountSessions(ctx context.Context) (map[string]int, error) {
	rows, err := st.r.QueryContext(ctx, `SELECT state, COUNT(*) FROM sessions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			state string
			n     int
		)
		if err := rows.Scan(&state, &n); err != nil {
			return nil, fmt.Errorf("count sessions: %w", err)
		}
		out[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	return out, nil
}
