package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/store"
)

// userColumns lists the columns scanUser reads, in its order.
const userColumns = `id, kind, issuer, subject, email, display_name, role, disabled, org_id,
	created_at, last_login_at, version`

// scanUser reads one row of userColumns.
func scanUser(row pgx.Row) (*store.User, error) {
	var u store.User
	if err := row.Scan(&u.ID, &u.Kind, &u.Issuer, &u.Subject, &u.Email, &u.DisplayName, &u.Role,
		&u.Disabled, &u.OrgID, &u.CreatedAt, &u.LastLoginAt, &u.Version); err != nil {
		return nil, err
	}
	u.CreatedAt = u.CreatedAt.UTC()
	u.LastLoginAt = utcPtr(u.LastLoginAt)
	return &u, nil
}

// utcPtr returns t in UTC, or nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// CreateUser inserts u with Version 1 (a zero CreatedAt set to now);
// ErrConflict if the id or a non-empty (Issuer, Subject) exists.
func (st *Store) CreateUser(ctx context.Context, u *store.User) error {
	u.CreatedAt = nowIfZero(u.CreatedAt).Truncate(time.Microsecond)
	tag, err := st.pool.Exec(ctx, `INSERT INTO users (`+userColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, 1) ON CONFLICT DO NOTHING`,
		u.ID, u.Kind, u.Issuer, u.Subject, u.Email, u.DisplayName, u.Role, u.Disabled, u.OrgID,
		u.CreatedAt, u.LastLoginAt)
	if err != nil {
		return fmt.Errorf("create user: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create user %s: %w", u.ID, store.ErrConflict)
	}
	u.Version = 1
	return nil
}

// GetUser returns the record or ErrNotFound.
func (st *Store) GetUser(ctx context.Context, id string) (*store.User, error) {
	return st.getUser(ctx, "get user "+id, `SELECT `+userColumns+` FROM users WHERE id = $1`, id)
}

// GetUserBySubject returns the user (issuer, subject) names, or
// ErrNotFound.
func (st *Store) GetUserBySubject(ctx context.Context, issuer, subject string) (*store.User, error) {
	if issuer == "" {
		return nil, fmt.Errorf("get user by subject: %w", store.ErrNotFound)
	}
	return st.getUser(ctx, "get user by subject",
		`SELECT `+userColumns+` FROM users WHERE issuer = $1 AND subject = $2`, issuer, subject)
}

func (st *Store) getUser(ctx context.Context, op, query string, args ...any) (*store.User, error) {
	u, err := scanUser(st.pool.QueryRow(ctx, query, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	return u, nil
}

// UpdateUser replaces the changeable fields if the stored Version equals
// u.Version and writes the others back into u; ErrConflict on another
// version, ErrNotFound if absent.
func (st *Store) UpdateUser(ctx context.Context, u *store.User) error {
	stored, err := scanUser(st.pool.QueryRow(ctx, `UPDATE users SET email = $1, display_name = $2,
		role = $3, disabled = $4, last_login_at = $5, version = version + 1
		WHERE id = $6 AND version = $7 RETURNING `+userColumns,
		u.Email, u.DisplayName, u.Role, u.Disabled, u.LastLoginAt, u.ID, u.Version))
	if errors.Is(err, pgx.ErrNoRows) {
		return st.missOrConflict(ctx, "update user",
			`SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, u.ID, u.Version)
	}
	if err != nil {
		return fmt.Errorf("update user: %w", err)
	}
	*u = *stored
	return nil
}

// ListUsers returns up to limit records with ID > afterID ordered by ID
// (limit <= 0: all).
func (st *Store) ListUsers(ctx context.Context, afterID string, limit int) ([]*store.User, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+userColumns+` FROM users
		WHERE id > $1 ORDER BY id LIMIT $2`, afterID, sqlLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.User, error) { return scanUser(r) })
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	return out, nil
}

// apiKeyColumns lists the columns scanAPIKey reads, in its order.
const apiKeyColumns = `id, user_id, name, secret_hash, scopes, created_at, expires_at,
	last_used_at, revoked_at`

// scanAPIKey reads one row of apiKeyColumns.
func scanAPIKey(row pgx.Row) (*store.APIKey, error) {
	var k store.APIKey
	if err := row.Scan(&k.ID, &k.UserID, &k.Name, &k.SecretHash, &k.Scopes, &k.CreatedAt,
		&k.ExpiresAt, &k.LastUsedAt, &k.RevokedAt); err != nil {
		return nil, err
	}
	if k.Scopes == nil {
		k.Scopes = []string{}
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = utcPtr(k.ExpiresAt), utcPtr(k.LastUsedAt), utcPtr(k.RevokedAt)
	return &k, nil
}

// CreateAPIKey inserts k (a zero CreatedAt set to now); ErrConflict if the
// id exists.
func (st *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	k.CreatedAt = nowIfZero(k.CreatedAt).Truncate(time.Microsecond)
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	tag, err := st.pool.Exec(ctx, `INSERT INTO api_keys (`+apiKeyColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING`,
		k.ID, k.UserID, k.Name, k.SecretHash, scopes, k.CreatedAt, k.ExpiresAt, k.LastUsedAt, k.RevokedAt)
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("create api key %s: %w", k.ID, store.ErrConflict)
	}
	return nil
}

// GetAPIKey returns the record or ErrNotFound.
func (st *Store) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	k, err := scanAPIKey(st.pool.QueryRow(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys returns the user's keys ordered by ID.
func (st *Store) ListAPIKeys(ctx context.Context, userID string) ([]*store.APIKey, error) {
	rows, err := st.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys
		WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*store.APIKey, error) { return scanAPIKey(r) })
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey sets RevokedAt to at unless already set and returns the
// record; ErrNotFound if absent.
func (st *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) (*store.APIKey, error) {
	k, err := scanAPIKey(st.pool.QueryRow(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, $1)
		WHERE id = $2 RETURNING `+apiKeyColumns, at.Truncate(time.Microsecond), id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("revoke api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke api key: %w", err)
	}
	return k, nil
}

// TouchAPIKey moves LastUsedAt forward to at; ErrNotFound if absent.
func (st *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	tag, err := st.pool.Exec(ctx, `UPDATE api_keys
		SET last_used_at = GREATEST(COALESCE(last_used_at, $1), $1) WHERE id = $2`,
		at.Truncate(time.Microsecond), id)
	if err != nil {
		return fmt.Errorf("touch api key: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("touch api key %s: %w", id, store.ErrNotFound)
	}
	return nil
}
