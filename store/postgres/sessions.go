package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// sessionColumns lists the columns scanSession reads, in its order.
const sessionColumns = `id, agent_id, engine_kind, state, title, current_turn_id,
	pending_interaction, answer, interrupt_requested_at, sandbox_id, runtime, native_key,
	owner_id, org_id, created_at, updated_at, last_active_at, version`

// scanSession reads one row of sessionColumns.
func scanSession(row pgx.Row) (*store.Session, error) {
	var (
		s                        store.Session
		pending, answer, runtime []byte
	)
	if err := row.Scan(&s.ID, &s.AgentID, &s.EngineKind, &s.State, &s.Title, &s.CurrentTurnID,
		&pending, &answer, &s.InterruptRequestedAt, &s.SandboxID, &runtime, &s.NativeKey, &s.OwnerID,
		&s.OrgID, &s.CreatedAt, &s.UpdatedAt, &s.LastActiveAt, &s.Version); err != nil {
		return nil, err
	}
	s.PendingInteraction, s.Answer, s.Runtime = pending, answer, runtime
	s.InterruptRequestedAt = utcPtr(s.InterruptRequestedAt)
	s.CreatedAt = s.CreatedAt.UTC()
	s.UpdatedAt = s.UpdatedAt.UTC()
	s.LastActiveAt = s.LastActiveAt.UTC()
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
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `INSERT INTO sessions (`+sessionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, 1)
		ON CONFLICT (id) DO NOTHING`,
		s.ID, s.AgentID, s.EngineKind, s.State, s.Title, s.CurrentTurnID,
		[]byte(s.PendingInteraction), []byte(s.Answer), s.InterruptRequestedAt, s.SandboxID, []byte(s.Runtime), s.NativeKey,
		s.OwnerID, s.OrgID, s.CreatedAt, s.UpdatedAt, s.LastActiveAt)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create session %s: %w", s.ID, store.ErrConflict)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO streams (id, next_seq) VALUES ($1, 1)
		ON CONFLICT (id) DO NOTHING`, s.ID); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	s.Version = 1
	return nil
}

// GetSession returns the record or ErrNotFound.
func (st *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	s, err := scanSession(st.pool.QueryRow(ctx, `SELECT `+sessionColumns+` FROM sessions WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
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
// ErrConflict on another version, ErrNotFound if absent. Of concurrent
// updates from one Version the row lock lets exactly one pass.
func (st *Store) UpdateSession(ctx context.Context, s *store.Session) error {
	updated := nowIfZero(s.UpdatedAt)
	var (
		created    time.Time
		owner, org string
	)
	err := st.pool.QueryRow(ctx, `UPDATE sessions SET agent_id = $1, engine_kind = $2,
		state = $3, title = $4, current_turn_id = $5, pending_interaction = $6, answer = $7,
		interrupt_requested_at = $8, sandbox_id = $9, runtime = $10, native_key = $11,
		updated_at = $12, last_active_at = $13, version = version + 1
		WHERE id = $14 AND version = $15 RETURNING created_at, owner_id, org_id`,
		s.AgentID, s.EngineKind, s.State, s.Title, s.CurrentTurnID, []byte(s.PendingInteraction),
		[]byte(s.Answer), s.InterruptRequestedAt, s.SandboxID, []byte(s.Runtime), s.NativeKey,
		updated, s.LastActiveAt, s.ID, s.Version).Scan(&created, &owner, &org)
	if errors.Is(err, pgx.ErrNoRows) {
		return st.missOrConflict(ctx, "update session",
			`SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)`, s.ID, s.Version)
	}
	if err != nil {
		return fmt.Errorf("update session: %w", err)
	}
	s.CreatedAt, s.UpdatedAt = created.UTC(), updated
	s.OwnerID, s.OrgID = owner, org
	s.Version++
	return nil
}

// DeleteSession removes the record with its inputs (by the foreign key's
// cascade), its log stream with its lease and its native state, in one
// transaction; ErrNotFound if absent. Deleting the row first waits for the
// AcceptInputs under way, which hold it; the native state's size row goes
// before its chunks, so an append under way is either waited for and
// removed or comes after, finding no state.
func (st *Store) DeleteSession(ctx context.Context, id string) error {
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	defer tx.Rollback(ctx)
	tag, err := tx.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
	}
	for _, q := range []string{
		`DELETE FROM streams WHERE id = $1`,
		`DELETE FROM stream_entries WHERE stream = $1`,
		`DELETE FROM native_states WHERE session_id = $1`,
		`DELETE FROM native_state_chunks WHERE session_id = $1`,
	} {
		if _, err := tx.Exec(ctx, q, id); err != nil {
			return fmt.Errorf("delete session: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// ListSessions returns the records matching f ordered by ID. Only the
// conditions f sets are in the query, so that a cached plan of it can use
// the index of each (agent, owner).
func (st *Store) ListSessions(ctx context.Context, f store.SessionFilter) ([]*store.Session, error) {
	args := []any{f.AfterID}
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	conds := []string{"id > $1"}
	if f.AgentID != "" {
		conds = append(conds, "agent_id = "+arg(f.AgentID))
	}
	if f.OwnerID != "" {
		conds = append(conds, "owner_id = "+arg(f.OwnerID))
	}
	if len(f.States) > 0 {
		conds = append(conds, "state = ANY("+arg(f.States)+")")
	}
	rows, err := st.pool.Query(ctx, `SELECT `+sessionColumns+` FROM sessions
		WHERE `+strings.Join(conds, " AND ")+` ORDER BY id LIMIT `+arg(sqlLimit(int64(f.Limit))), args...)
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Session, error) {
		return scanSession(row)
	})
	if err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	return out, nil
}

// CountSessions returns how many Sessions are in each state.
func (st *Store) CountSessions(ctx context.Context) (map[string]int, error) {
	rows, err := st.pool.Query(ctx, `SELECT state, COUNT(*) FROM sessions GROUP BY state`)
	if err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	out := map[string]int{}
	var (
		state string
		n     int
	)
	if _, err := pgx.ForEachRow(rows, []any{&state, &n}, func() error { out[state] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count sessions: %w", err)
	}
	return out, nil
}
