package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// CreateWebSession inserts s (a zero CreatedAt set to now); ErrConflict if
// the id or the flow exists.
func (st *Store) CreateWebSession(ctx context.Context, s *store.WebSession) error {
	s.CreatedAt = nowIfZero(s.CreatedAt).Truncate(time.Microsecond)
	tag, err := st.pool.Exec(ctx, `INSERT INTO web_sessions (id, user_id, flow_id, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
		s.ID, s.UserID, s.FlowID, s.CreatedAt, s.ExpiresAt.Truncate(time.Microsecond))
	if err != nil {
		return fmt.Errorf("create web session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create web session: %w", store.ErrConflict)
	}
	return nil
}

// GetWebSession returns the record or ErrNotFound.
func (st *Store) GetWebSession(ctx context.Context, id string) (*store.WebSession, error) {
	var s store.WebSession
	err := st.pool.QueryRow(ctx, `SELECT id, user_id, flow_id, created_at, expires_at
		FROM web_sessions WHERE id = $1`, id).Scan(&s.ID, &s.UserID, &s.FlowID, &s.CreatedAt, &s.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get web session: %w", store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get web session: %w", err)
	}
	s.CreatedAt, s.ExpiresAt = s.CreatedAt.UTC(), s.ExpiresAt.UTC()
	return &s, nil
}

// DeleteWebSession removes the record; ErrNotFound if absent.
func (st *Store) DeleteWebSession(ctx context.Context, id string) error {
	tag, err := st.pool.Exec(ctx, `DELETE FROM web_sessions WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("delete web session: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete web session: %w", store.ErrNotFound)
	}
	return nil
}

// DeleteWebSessionsBefore removes the records expired before t and every
// record of userID (when not "").
func (st *Store) DeleteWebSessionsBefore(ctx context.Context, t time.Time, userID string) error {
	if _, err := st.pool.Exec(ctx, `DELETE FROM web_sessions WHERE expires_at < $1 OR ($2 <> '' AND user_id = $2)`,
		t, userID); err != nil {
		return fmt.Errorf("delete web sessions: %w", err)
	}
	return nil
}
