package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"time"

	idwire "github.com/astrabox/astrabox/identity/wire"
)

// Identity (/api/v1/user/... and /api/v1/admin/...): who the caller is,
// their API keys, and for administrators the users, everyone's keys and
// the audit log. The wire types are package identity/wire's, named below.
//
// A key is "abx_<id>_<secret>"; the server keeps only a hash of the
// secret, so a key's text is seen once, in the NewAPIKey that created it.
// Errors: UNAUTHORIZED (a missing, unknown, revoked key or a disabled
// user's), TOKEN_EXPIRED, FORBIDDEN (the key lacks the scope a route
// needs, or asks for more than its user's role), NOT_FOUND and
// INVALID_REQUEST; see CodeOf.

// The roles a user may have, from the most to the least able.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
	RoleViewer = "viewer"
)

// The scopes a key may carry.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
	ScopeAdmin = "admin"
)

// The kinds of user.
const (
	// UserService is a program's user: it signs in with API keys only.
	UserService = "service"
	// UserHuman is a person's user, known to an identity provider by
	// issuer and subject.
	UserHuman = "human"
)

type (
	// User is a user; LastLoginAt is nil until a human first signs in.
	User = idwire.User
	// UserRequest creates a user (Role required; ID, Kind, Issuer and
	// Subject are fixed then) or changes one (only the non-nil fields).
	UserRequest = idwire.UserRequest
	// APIKey is an API key, never with its secret.
	APIKey = idwire.APIKey
	// APIKeyRequest makes a key: Scopes default to its user's role's,
	// and none may exceed it; ExpiresAt or ExpiresInSeconds bound its
	// life (the server may bound it further).
	APIKeyRequest = idwire.APIKeyRequest
	// NewAPIKey is a key just made; Key is its full text, which the
	// server never shows again.
	NewAPIKey = idwire.NewAPIKey
	// CurrentUser is who a request acts as: the user, the request's
	// scopes (its key's within the user's role) and the key's id ("" for
	// the server's bootstrap key).
	CurrentUser = idwire.CurrentUser
	// AuditEntry is one entry of the audit log.
	AuditEntry = idwire.AuditEntry
)

// CurrentUser returns who the client's key acts as and what it may do.
func (c *Client) CurrentUser(ctx context.Context) (CurrentUser, error) {
	var out CurrentUser
	err := c.apiJSON(ctx, http.MethodGet, "/user/current", nil, nil, &out, nil)
	return out, err
}

// ListAPIKeys returns the caller's API keys, revoked ones included.
func (c *Client) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	var out Page[APIKey]
	err := c.apiJSON(ctx, http.MethodGet, "/user/api-keys", nil, nil, &out, nil)
	return out.Items, err
}

// CreateAPIKey makes a key of the caller's. The returned Key is the only
// copy of its text.
func (c *Client) CreateAPIKey(ctx context.Context, req APIKeyRequest) (NewAPIKey, error) {
	var out NewAPIKey
	err := c.apiJSON(ctx, http.MethodPost, "/user/api-keys", nil, req, &out, nil)
	return out, err
}

// RevokeAPIKey revokes one of the caller's keys (NOT_FOUND when keyID is
// not the caller's) and returns it as revoked. Revoking the key the
// client uses is allowed: later calls are UNAUTHORIZED.
func (c *Client) RevokeAPIKey(ctx context.Context, keyID string) (APIKey, error) {
	if keyID == "" {
		return APIKey{}, errors.New("revoke api key: a key id is required")
	}
	var out APIKey
	err := c.apiJSON(ctx, http.MethodDelete, "/user/api-keys/"+url.PathEscape(keyID), nil, nil, &out, nil)
	return out, err
}

// ListUsers returns a page of users, by id (admin).
func (c *Client) ListUsers(ctx context.Context, page PageOptions) (Page[User], error) {
	var out Page[User]
	err := c.apiJSON(ctx, http.MethodGet, "/admin/users", page.query(), nil, &out, nil)
	return out, err
}

// CreateUser creates a user (admin): req.Role is required; req.ID
// defaults to a generated one, req.Kind to UserService. A human user
// needs the Issuer and Subject its identity provider knows it by.
func (c *Client) CreateUser(ctx context.Context, req UserRequest) (User, error) {
	var out User
	err := c.apiJSON(ctx, http.MethodPost, "/admin/users", nil, req, &out, nil)
	return out, err
}

// GetUser returns a user (admin; NOT_FOUND if none).
func (c *Client) GetUser(ctx context.Context, id string) (User, error) {
	if id == "" {
		return User{}, errors.New("get user: a user id is required")
	}
	var out User
	err := c.apiJSON(ctx, http.MethodGet, "/admin/users/"+url.PathEscape(id), nil, nil, &out, nil)
	return out, err
}

// UpdateUser changes the fields of req that are not nil (Role, Disabled,
// Email, DisplayName) and returns the user as changed (admin). A role
// lowered or a user disabled narrows or ends their keys' authority at
// once. An administrator cannot change their own role or disable
// themselves (FORBIDDEN).
func (c *Client) UpdateUser(ctx context.Context, id string, req UserRequest) (User, error) {
	if id == "" {
		return User{}, errors.New("update user: a user id is required")
	}
	var out User
	err := c.apiJSON(ctx, http.MethodPatch, "/admin/users/"+url.PathEscape(id), nil, req, &out, nil)
	return out, err
}

// ListUserAPIKeys returns a user's API keys, revoked ones included
// (admin).
func (c *Client) ListUserAPIKeys(ctx context.Context, userID string) ([]APIKey, error) {
	if userID == "" {
		return nil, errors.New("list user api keys: a user id is required")
	}
	var out Page[APIKey]
	err := c.apiJSON(ctx, http.MethodGet, "/admin/users/"+url.PathEscape(userID)+"/api-keys", nil, nil, &out, nil)
	return out.Items, err
}

// CreateUserAPIKey makes a key of another user's (admin), with scopes
// within that user's role. The returned Key is the only copy of its text.
func (c *Client) CreateUserAPIKey(ctx context.Context, userID string, req APIKeyRequest) (NewAPIKey, error) {
	if userID == "" {
		return NewAPIKey{}, errors.New("create user api key: a user id is required")
	}
	var out NewAPIKey
	err := c.apiJSON(ctx, http.MethodPost, "/admin/users/"+url.PathEscape(userID)+"/api-keys", nil, req, &out, nil)
	return out, err
}

// RevokeUserAPIKey revokes a key of a user (admin; NOT_FOUND when keyID
// is not that user's) and returns it as revoked.
func (c *Client) RevokeUserAPIKey(ctx context.Context, userID, keyID string) (APIKey, error) {
	if userID == "" || keyID == "" {
		return APIKey{}, errors.New("revoke user api key: a user id and a key id are required")
	}
	var out APIKey
	err := c.apiJSON(ctx, http.MethodDelete, "/admin/users/"+url.PathEscape(userID)+"/api-keys/"+url.PathEscape(keyID), nil, nil, &out, nil)
	return out, err
}

// AuditFilter selects entries of the audit log; its zero value selects
// every entry.
type AuditFilter struct {
	// Actor is the user who acted.
	Actor string
	// Action is an action ("user.create"), or a prefix of actions ending
	// in "." ("api_key.").
	Action string
	// Target is what was acted on: "user:alice", "api_key:<id>",
	// "sandbox:<id>", ...
	Target string
	// Since, when not zero, keeps entries at or after it.
	Since time.Time
	// Limit is the most entries of the page (1 to 200; 0: the server's
	// default, 100).
	Limit int
	// Cursor is a previous page's NextCursor ("" for the newest page).
	Cursor string
}

func (f AuditFilter) query() url.Values {
	q := PageOptions{Limit: f.Limit, Cursor: f.Cursor}.query()
	if f.Actor != "" {
		q.Set("actor_id", f.Actor)
	}
	if f.Action != "" {
		q.Set("action", f.Action)
	}
	if f.Target != "" {
		q.Set("target", f.Target)
	}
	if !f.Since.IsZero() {
		q.Set("since", f.Since.UTC().Format(time.RFC3339Nano))
	}
	return q
}

// ListAudit returns a page of the audit log, newest first (admin); the
// page's NextCursor, in f.Cursor, gives the older entries.
func (c *Client) ListAudit(ctx context.Context, f AuditFilter) (Page[AuditEntry], error) {
	if f.Limit < 0 {
		return Page[AuditEntry]{}, errors.New("list audit: limit " + strconv.Itoa(f.Limit) + " is negative")
	}
	var out Page[AuditEntry]
	err := c.apiJSON(ctx, http.MethodGet, "/admin/audit", f.query(), nil, &out, nil)
	return out, err
}
