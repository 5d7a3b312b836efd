// Package wire holds the JSON shapes of identity's routes (users, API
// keys, the caller, the audit log), shared by the server and the Go SDK.
// It imports the standard library only.
package wire

import (
	"encoding/json"
	"time"
)

// User is a user as the API shows it.
type User struct {
	ID string `json:"user_id"`
	// Kind is "human" or "service".
	Kind        string     `json:"kind"`
	Issuer      string     `json:"issuer,omitempty"`
	Subject     string     `json:"subject,omitempty"`
	Email       string     `json:"email,omitempty"`
	DisplayName string     `json:"display_name,omitempty"`
	Role        string     `json:"role"`
	Disabled    bool       `json:"disabled"`
	OrgID       string     `json:"org_id"`
	CreatedAt   time.Time  `json:"created_at"`
	LastLoginAt *time.Time `json:"last_login_at"`
	Version     int64      `json:"version"`
}

// UserRequest creates a user (POST /api/v1/admin/users) or changes one
// (PATCH /api/v1/admin/users/{id}: only the fields given change; ID, Kind,
// Issuer and Subject are fixed at creation).
type UserRequest struct {
	// ID is the new user's id (default: generated).
	ID string `json:"user_id,omitempty"`
	// Kind is "service" (default) or "human".
	Kind        string  `json:"kind,omitempty"`
	Issuer      string  `json:"issuer,omitempty"`
	Subject     string  `json:"subject,omitempty"`
	Email       *string `json:"email,omitempty"`
	DisplayName *string `json:"display_name,omitempty"`
	// Role is required on create.
	Role     *string `json:"role,omitempty"`
	Disabled *bool   `json:"disabled,omitempty"`
}

// APIKey is an API key as the API shows it: never its secret.
type APIKey struct {
	ID         string     `json:"key_id"`
	UserID     string     `json:"user_id"`
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
}

// APIKeyRequest makes a key.
type APIKeyRequest struct {
	Name string `json:"name"`
	// Scopes default to every scope of the owner's role; none may exceed
	// it.
	Scopes []string `json:"scopes,omitempty"`
	// ExpiresAt (or ExpiresInSeconds) bounds the key's life; the server's
	// maximum lifetime, when set, bounds both and applies when neither is
	// given.
	ExpiresAt        *time.Time `json:"expires_at,omitempty"`
	ExpiresInSeconds int64      `json:"expires_in_seconds,omitempty"`
}

// NewAPIKey answers a key's creation: Key is its full text, shown this
// once and never again.
type NewAPIKey struct {
	APIKey
	Key string `json:"key"`
}

// CurrentUser answers GET /api/v1/user/current: who the caller is and
// what this request may do.
type CurrentUser struct {
	User User `json:"user"`
	// Scopes are the request's: its key's scopes within the user's role.
	Scopes []string `json:"scopes"`
	// KeyID is the key the request presented ("" for the bootstrap key or
	// a browser session).
	KeyID string `json:"key_id,omitempty"`
}

// AuditEntry is one entry of the audit log.
type AuditEntry struct {
	Seq       int64           `json:"seq"`
	At        time.Time       `json:"at"`
	ActorID   string          `json:"actor_id"`
	Action    string          `json:"action"`
	Target    string          `json:"target"`
	RequestID string          `json:"request_id"`
	Detail    json.RawMessage `json:"detail,omitempty"`
}

// Page is one page of a list; NextCursor is null on the last.
type Page[T any] struct {
	Items      []T     `json:"items"`
	NextCursor *string `json:"next_cursor"`
}
