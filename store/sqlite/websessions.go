package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// CreateWebSession inserts s (a zero CreatedAt set to now); ErrConflict if
// the id or the flow exists.
func (st *Store) CreateWebSession(ctx context.Context, s *store.WebSession) error {
	s.CreatedAt = fromMicros(micros(nowIfZero(s.CreatedAt)))
	return st.execOne(ctx, "create web session", "", store.ErrConflict, `INSERT INTO web_sessions (id, user_id, flow_id, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
		s.ID, s.UserID, s.FlowID, micros(s.CreatedAt), micros(s.ExpiresAt))
}

// GetWebSession returns the record or ErrNotFound.
func (st *Store) GetWebSession(ctx context.Context, id string) (*store.WebSession, error) {
	var (
		s                store.WebSession
		created, expires int64
	)
	err := st.r.QueryRowContext(ctx, `SELECT id, user_id, flow_id, created_at, expires_at
		FROM web_sessions WHERE id = ?`, id).Scan(&s.ID, &s.UserID, &s.FlowID, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get web session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get web session: %w", err)
	}
	s.CreatedAt, s.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &s, nil
}

// DeleteWebSession removes the record; ErrNotFound if absent.
func (st *Store) DeleteWebSession(ctx context.Context, id string) error {
	return st.execOne(ctx, "delete web session", "", store.ErrNotFound, `DELETE FROM web_sessions WHERE id = ?`, id)
}

// DeleteWebSessionsBefore removes the records expired before t and every
// record of userID (when not "").
func (st *Store) DeleteWebSessionsBefore(ctx context.Context, t time.Time, userID string) error {
	if _, err := st.w.ExecContext(ctx, `DELETE FROM web_sessions WHERE expires_at < ? OR (? <> '' AND user_id = ?)`,
		micros(t), userID, userID); err != nil {
		return fmt.Errorf("delete web sessions: %w", err)
	}
	return nil
}
