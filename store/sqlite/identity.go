package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// userColumns lists the columns scanUser reads, in its order.
const userColumns = `id, kind, issuer, subject, email, display_name, role, disabled, org_id,
	created_at, last_login_at, version`

// scanUser reads one row of userColumns.
func scanUser(row rowScanner) (*store.User, error) {
	var (
		u         store.User
		created   int64
		lastLogin sql.NullInt64
	)
	if err := row.Scan(&u.ID, &u.Kind, &u.Issuer, &u.Subject, &u.Email, &u.DisplayName, &u.Role,
		&u.Disabled, &u.OrgID, &created, &lastLogin, &u.Version); err != nil {
		return nil, err
	}
	u.CreatedAt = fromMicros(created)
	u.LastLoginAt = fromNullMicros(lastLogin)
	return &u, nil
}

// CreateUser inserts u with Version 1 (a zero CreatedAt set to now);
// ErrConflict if the id or a non-empty (Issuer, Subject) exists.
func (st *Store) CreateUser(ctx context.Context, u *store.User) error {
	u.CreatedAt = fromMicros(micros(nowIfZero(u.CreatedAt)))
	if err := st.execOne(ctx, "create user", u.ID, store.ErrConflict, `INSERT INTO users (`+userColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1) ON CONFLICT DO NOTHING`,
		u.ID, u.Kind, u.Issuer, u.Subject, u.Email, u.DisplayName, u.Role, u.Disabled, u.OrgID,
		micros(u.CreatedAt), nullMicros(u.LastLoginAt)); err != nil {
		return err
	}
	u.Version = 1
	return nil
}

// GetUser returns the record or ErrNotFound.
func (st *Store) GetUser(ctx context.Context, id string) (*store.User, error) {
	return st.getUser(ctx, "get user "+id, `SELECT `+userColumns+` FROM users WHERE id = ?`, id)
}

// GetUserBySubject returns the user (issuer, subject) names, or
// ErrNotFound.
func (st *Store) GetUserBySubject(ctx context.Context, issuer, subject string) (*store.User, error) {
	if issuer == "" {
		return nil, fmt.Errorf("get user by subject: %w", store.ErrNotFound)
	}
	return st.getUser(ctx, "get user by subject",
		`SELECT `+userColumns+` FROM users WHERE issuer = ? AND subject = ?`, issuer, subject)
}

func (st *Store) getUser(ctx context.Context, op, query string, args ...any) (*store.User, error) {
	u, err := scanUser(st.r.QueryRowContext(ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
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
	stored, err := scanUser(st.w.QueryRowContext(ctx, `UPDATE users SET email = ?, display_name = ?,
		role = ?, disabled = ?, last_login_at = ?, version = version + 1
		WHERE id = ? AND version = ? RETURNING `+userColumns,
		u.Email, u.DisplayName, u.Role, u.Disabled, nullMicros(u.LastLoginAt), u.ID, u.Version))
	if errors.Is(err, sql.ErrNoRows) {
		return st.missOrConflict(ctx, "update user", `SELECT 1 FROM users WHERE id = ?`, u.ID, u.Version)
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
	return queryAll(ctx, st.r, "list users", scanUser, `SELECT `+userColumns+` FROM users
		WHERE id > ? ORDER BY id LIMIT ?`, afterID, sqlLimit(int64(limit)))
}

// apiKeyColumns lists the columns scanAPIKey reads, in its order.
const apiKeyColumns = `id, user_id, name, secret_hash, scopes, created_at, expires_at,
	last_used_at, revoked_at`

// scanAPIKey reads one row of apiKeyColumns.
func scanAPIKey(row rowScanner) (*store.APIKey, error) {
	var (
		k                      store.APIKey
		scopes                 sql.NullString
		created                int64
		expires, used, revoked sql.NullInt64
	)
	if err := row.Scan(&k.ID, &k.UserID, &k.Name, &k.SecretHash, &scopes, &created,
		&expires, &used, &revoked); err != nil {
		return nil, err
	}
	var err error
	if k.Scopes, err = decodeStrings(scopes); err != nil {
		return nil, err
	}
	k.CreatedAt = fromMicros(created)
	k.ExpiresAt, k.LastUsedAt, k.RevokedAt = fromNullMicros(expires), fromNullMicros(used), fromNullMicros(revoked)
	return &k, nil
}

// CreateAPIKey inserts k (a zero CreatedAt set to now); ErrConflict if the
// id exists.
func (st *Store) CreateAPIKey(ctx context.Context, k *store.APIKey) error {
	k.CreatedAt = fromMicros(micros(nowIfZero(k.CreatedAt)))
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	enc, err := encodeStrings(scopes)
	if err != nil {
		return fmt.Errorf("create api key: %w", err)
	}
	return st.execOne(ctx, "create api key", k.ID, store.ErrConflict, `INSERT INTO api_keys (`+apiKeyColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		k.ID, k.UserID, k.Name, k.SecretHash, enc, micros(k.CreatedAt),
		nullMicros(k.ExpiresAt), nullMicros(k.LastUsedAt), nullMicros(k.RevokedAt))
}

// GetAPIKey returns the record or ErrNotFound.
func (st *Store) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	k, err := scanAPIKey(st.r.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys returns the user's keys ordered by ID.
func (st *Store) ListAPIKeys(ctx context.Context, userID string) ([]*store.APIKey, error) {
	return queryAll(ctx, st.r, "list api keys", scanAPIKey, `SELECT `+apiKeyColumns+` FROM api_keys
		WHERE user_id = ? ORDER BY id`, userID)
}

// RevokeAPIKey sets RevokedAt to at unless already set and returns the
// record; ErrNotFound if absent.
func (st *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) (*store.APIKey, error) {
	k, err := scanAPIKey(st.w.QueryRowContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?)
		WHERE id = ? RETURNING `+apiKeyColumns, micros(at), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("revoke api key %s: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("revoke api key: %w", err)
	}
	return k, nil
}

// TouchAPIKey moves LastUsedAt forward to at; ErrNotFound if absent.
func (st *Store) TouchAPIKey(ctx context.Context, id string, at time.Time) error {
	return st.execOne(ctx, "touch api key", id, store.ErrNotFound, `UPDATE api_keys SET last_used_at = MAX(COALESCE(last_used_at, 0), ?)
		WHERE id = ?`, micros(at), id)
}
