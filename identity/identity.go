// Package identity says who is asking and what they may do: the roles and
// scopes of AstraBox's principals, the format of per-user API keys, and
// the Authenticator that turns a presented key into a Principal.
//
// A request's authority is its key's scopes intersected with its owner's
// current role, recomputed on every request from records at most
// Config.TTL old: demoting or disabling a user narrows or kills their keys
// on every replica within that time. Only the SHA-256 of a key's secret is
// ever stored; the key is shown once, when it is made.
package identity

import (
	"net/http"
	"slices"

	"github.com/astrabox/astrabox/sandbox"
)

// Role is a user's role.
type Role string

// The roles, from the most to the least able.
const (
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleMember creates and manages its own records and uses what is
	// shared with it.
	RoleMember Role = "member"
	// RoleViewer reads what it may see and writes nothing.
	RoleViewer Role = "viewer"
)

// Roles lists the roles, from the most to the least able.
var Roles = []Role{RoleAdmin, RoleMember, RoleViewer}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Scope is a permission a key may carry and a route may need.
type Scope string

// The scopes.
const (
	// ScopeRead reads records the caller may see.
	ScopeRead Scope = "read"
	// ScopeWrite creates, changes and deletes them.
	ScopeWrite Scope = "write"
	// ScopeAdmin manages users, keys of others, runtime profiles, vaults
	// and everyone's records.
	ScopeAdmin Scope = "admin"
)

// Scopes lists every scope.
var Scopes = []Scope{ScopeRead, ScopeWrite, ScopeAdmin}

// Valid reports whether s is one of Scopes.
func (s Scope) Valid() bool { return slices.Contains(Scopes, s) }

// RoleScopes returns the scopes a role grants.
func RoleScopes(r Role) []Scope {
	switch r {
	case RoleAdmin:
		return []Scope{ScopeRead, ScopeWrite, ScopeAdmin}
	case RoleMember:
		return []Scope{ScopeRead, ScopeWrite}
	case RoleViewer:
		return []Scope{ScopeRead}
	}
	return nil
}

// Principal is the authenticated caller of one request.
type Principal struct {
	// UserID is the user the request acts as.
	UserID string
	// Role is the user's role when the request was authenticated.
	Role Role
	// Scopes are what the request may do: its key's scopes intersected
	// with Role's (see RoleScopes), in the order of Scopes.
	Scopes []Scope
	// KeyID is the API key the request presented; "" for the bootstrap
	// key and for a browser session.
	KeyID string
	// OrgID is the user's organization.
	OrgID string
}

// Can reports whether p holds scope s.
func (p *Principal) Can(s Scope) bool { return p != nil && slices.Contains(p.Scopes, s) }

// IsAdmin reports whether p may act on everyone's records.
func (p *Principal) IsAdmin() bool { return p.Can(ScopeAdmin) }

// Owns reports whether p may act on a record owned by ownerID as its
// owner: p is that owner, or an administrator.
func (p *Principal) Owns(ownerID string) bool {
	return p != nil && (p.IsAdmin() || (ownerID != "" && ownerID == p.UserID))
}

// Intersect returns the scopes of want that grant also holds, in the order
// of Scopes.
func Intersect(want, grant []Scope) []Scope {
	out := []Scope{}
	for _, s := range Scopes {
		if slices.Contains(want, s) && slices.Contains(grant, s) {
			out = append(out, s)
		}
	}
	return out
}

// Error codes of identity, with their HTTP statuses.
const (
	// CodeTokenExpired: the presented key (or sign-in) has expired.
	CodeTokenExpired sandbox.Code = "TOKEN_EXPIRED"
	// CodeForbidden: the caller may see the record but lacks the
	// permission the action needs (the message names it).
	CodeForbidden sandbox.Code = "FORBIDDEN"
)

func init() {
	sandbox.RegisterStatus(CodeTokenExpired, http.StatusUnauthorized)
	sandbox.RegisterStatus(CodeForbidden, http.StatusForbidden)
}

// Unauthorized is the one answer to a missing, unknown, malformed or
// revoked key, or a disabled user's: it never says which part was wrong.
func Unauthorized() error {
	return sandbox.Errorf(sandbox.CodeUnauthorized, "missing or invalid API key")
}

// Forbidden answers a visible record the caller may not change, naming
// the missing permission.
func Forbidden(format string, args ...any) error {
	return sandbox.Errorf(CodeForbidden, format, args...)
}
