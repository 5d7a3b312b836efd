package store

import (
	"context"
	"encoding/json"
	"time"
)

// User is a principal: a person signed in through an identity provider
// (Kind "human": Issuer and Subject name them there) or a service that
// holds API keys only (Kind "service").
type User struct {
	ID string
	// Kind is "human" or "service".
	Kind string
	// Issuer and Subject are the identity provider's names for a person;
	// both "" for a service user. A (Issuer, Subject) pair names at most
	// one user.
	Issuer      string
	Subject     string
	Email       string
	DisplayName string
	// Role is "admin", "member" or "viewer".
	Role     string
	Disabled bool
	// OrgID is the organization the user belongs to (one per deployment
	// for now).
	OrgID       string
	CreatedAt   time.Time
	LastLoginAt *time.Time
	// Version is 1 after create and increases with every update.
	Version int64
}

// Users keeps User records.
type Users interface {
	// CreateUser inserts u (Version set to 1, a zero CreatedAt set to now
	// and written back); ErrConflict if the id, or a non-empty
	// (Issuer, Subject) pair, exists.
	CreateUser(ctx context.Context, u *User) error
	// GetUser returns the record or ErrNotFound.
	GetUser(ctx context.Context, id string) (*User, error)
	// GetUserBySubject returns the user an identity provider names
	// (issuer, subject), or ErrNotFound.
	GetUserBySubject(ctx context.Context, issuer, subject string) (*User, error)
	// UpdateUser replaces the record's Email, DisplayName, Role,
	// Disabled and LastLoginAt if its stored Version equals u.Version,
	// then increments u.Version; ErrConflict on another version,
	// ErrNotFound if absent. The other fields keep their stored values,
	// which are written back into u.
	UpdateUser(ctx context.Context, u *User) error
	// ListUsers returns up to limit records with ID > afterID, ordered by
	// ID (limit <= 0: all).
	ListUsers(ctx context.Context, afterID string, limit int) ([]*User, error)
}

// APIKey is a user's API key. Only the SHA-256 of its secret is kept: the
// key itself is shown once, when it is made.
type APIKey struct {
	ID     string
	UserID string
	Name   string
	// SecretHash is the SHA-256 of the key's secret part.
	SecretHash []byte
	// Scopes are among "read", "write", "admin".
	Scopes    []string
	CreatedAt time.Time
	// ExpiresAt is nil for a key that does not expire.
	ExpiresAt  *time.Time
	LastUsedAt *time.Time
	// RevokedAt is set once the key is revoked; it never clears.
	RevokedAt *time.Time
}

// APIKeys keeps APIKey records.
type APIKeys interface {
	// CreateAPIKey inserts k (a zero CreatedAt set to now and written
	// back); ErrConflict if the id exists.
	CreateAPIKey(ctx context.Context, k *APIKey) error
	// GetAPIKey returns the record or ErrNotFound.
	GetAPIKey(ctx context.Context, id string) (*APIKey, error)
	// ListAPIKeys returns the keys of one user, revoked ones included,
	// ordered by ID.
	ListAPIKeys(ctx context.Context, userID string) ([]*APIKey, error)
	// RevokeAPIKey sets the key's RevokedAt to at unless it is already
	// revoked (the first revocation's time stays) and returns the record;
	// ErrNotFound if absent.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) (*APIKey, error)
	// TouchAPIKey moves the key's LastUsedAt forward to at (never back);
	// ErrNotFound if absent.
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// AuditEntry is one security-relevant action: who (ActorID) did what
// (Action, e.g. "api_key.create") to what (Target, e.g. "api_key:k1"),
// when, in which request, with the action's non-secret details.
type AuditEntry struct {
	// Seq is assigned by AppendAudit, increasing per store.
	Seq       int64
	At        time.Time
	ActorID   string
	Action    string
	Target    string
	RequestID string
	// Detail is a JSON object or nil; it never holds a secret.
	Detail json.RawMessage
}

// AuditFilter selects audit entries; zero fields select all.
type AuditFilter struct {
	ActorID string
	// Action matches exactly, or a prefix when it ends in "." (e.g.
	// "api_key." for every key action).
	Action string
	Target string
	// BeforeSeq selects entries with Seq < BeforeSeq (0: no bound): the
	// cursor of the next, older page.
	BeforeSeq int64
	// Since selects entries at or after it (zero: no bound).
	Since time.Time
	// Limit bounds the entries returned (<= 0: all).
	Limit int
}

// Audit keeps the append-only audit log.
type Audit interface {
	// AppendAudit appends e (a zero At set to now) and writes its Seq
	// back.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit returns the entries f selects, newest (highest Seq) first.
	ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error)
}

// WebSession is a browser's signed-in session. Only the SHA-256 of its
// id (the cookie's value) is kept, hex-encoded, as ID.
type WebSession struct {
	ID     string
	UserID string
	// FlowID names the sign-in flow that made the session: one flow makes
	// at most one session, so a replayed flow is refused.
	FlowID    string
	CreatedAt time.Time
	ExpiresAt time.Time
}

// WebSessions keeps WebSession records.
type WebSessions interface {
	// CreateWebSession inserts s (a zero CreatedAt set to now);
	// ErrConflict if the id or the FlowID exists.
	CreateWebSession(ctx context.Context, s *WebSession) error
	// GetWebSession returns the record or ErrNotFound (an expired record
	// is still returned: the caller compares ExpiresAt).
	GetWebSession(ctx context.Context, id string) (*WebSession, error)
	// DeleteWebSession removes the record; ErrNotFound if absent.
	DeleteWebSession(ctx context.Context, id string) error
	// DeleteWebSessionsBefore removes the records that expired before t
	// and, when userID is not "", every record of that user.
	DeleteWebSessionsBefore(ctx context.Context, t time.Time, userID string) error
}
