package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/astrabox/astrabox/identity/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// CodeInvalid is the agent platform's code for a request it refuses
// (registered with status 400 by both).
const CodeInvalid sandbox.Code = "INVALID_REQUEST"

func init() { sandbox.RegisterStatus(CodeInvalid, 400) }

func invalid(format string, args ...any) error { return sandbox.Errorf(CodeInvalid, format, args...) }

// AccountStore is what Accounts keeps in the server's store.
type AccountStore interface {
	store.Users
	store.APIKeys
	store.Audit
}

// AccountsConfig configures Accounts.
type AccountsConfig struct {
	Store AccountStore
	// Auth is told of changes made here (Forget), so that they take
	// effect on this replica at once.
	Auth *Authenticator
	// MaxKeyLifetime, when positive, bounds every new key's life and is
	// the life of a key asked for without one.
	MaxKeyLifetime time.Duration
	Logger         *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Accounts manages users and API keys and keeps the audit log. Its
// methods take the acting principal; the route that calls one has already
// checked the scope it needs (ScopeAdmin for other users' records), and
// the methods check what depends on the records themselves.
type Accounts struct {
	cfg AccountsConfig
	st  AccountStore
}

// NewAccounts returns Accounts.
func NewAccounts(cfg AccountsConfig) *Accounts {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Accounts{cfg: cfg, st: cfg.Store}
}

// MaxKeyLifetime returns the bound on every new key's life (0: none).
func (a *Accounts) MaxKeyLifetime() time.Duration { return a.cfg.MaxKeyLifetime }

// ToUser returns the wire form of u.
func ToUser(u *store.User) wire.User {
	return wire.User{ID: u.ID, Kind: u.Kind, Issuer: u.Issuer, Subject: u.Subject, Email: u.Email,
		DisplayName: u.DisplayName, Role: u.Role, Disabled: u.Disabled, OrgID: u.OrgID,
		CreatedAt: u.CreatedAt, LastLoginAt: u.LastLoginAt, Version: u.Version}
}

// ToAPIKey returns the wire form of k: never its secret's hash.
func ToAPIKey(k *store.APIKey) wire.APIKey {
	scopes := k.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	return wire.APIKey{ID: k.ID, UserID: k.UserID, Name: k.Name, Scopes: scopes, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, LastUsedAt: k.LastUsedAt, RevokedAt: k.RevokedAt}
}

// Current describes the caller p.
func (a *Accounts) Current(ctx context.Context, p *Principal) (wire.CurrentUser, error) {
	u, err := a.user(ctx, p.UserID)
	if err != nil {
		return wire.CurrentUser{}, err
	}
	scopes := make([]string, len(p.Scopes))
	for i, s := range p.Scopes {
		scopes[i] = string(s)
	}
	return wire.CurrentUser{User: ToUser(u), Scopes: scopes, KeyID: p.KeyID}, nil
}

// user returns the record or a NOT_FOUND naming the user.
func (a *Accounts) user(ctx context.Context, id string) (*store.User, error) {
	u, err := a.st.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, sandbox.Errorf(sandbox.CodeNotFound, "user %q not found", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get user: %w", err)
	}
	return u, nil
}

// GetUser returns a user.
func (a *Accounts) GetUser(ctx context.Context, id string) (wire.User, error) {
	u, err := a.user(ctx, id)
	if err != nil {
		return wire.User{}, err
	}
	return ToUser(u), nil
}

// ListUsers returns a page of users after the cursor (a user id).
func (a *Accounts) ListUsers(ctx context.Context, cursor string, limit int) ([]wire.User, string, error) {
	if limit <= 0 {
		limit = 100
	}
	us, err := a.st.ListUsers(ctx, cursor, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list users: %w", err)
	}
	next := ""
	if len(us) > limit {
		us, next = us[:limit], us[limit-1].ID
	}
	out := make([]wire.User, len(us))
	for i, u := range us {
		out[i] = ToUser(u)
	}
	return out, next, nil
}

// userIDPattern is what a user id may be: it appears in paths and logs.
var userIDPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// CreateUser creates a user on the actor's behalf.
func (a *Accounts) CreateUser(ctx context.Context, actor *Principal, req wire.UserRequest) (wire.User, error) {
	u := &store.User{ID: req.ID, Kind: req.Kind, Issuer: req.Issuer, Subject: req.Subject, OrgID: actor.OrgID}
	if u.ID == "" {
		u.ID = "usr_" + randomString(12)
	}
	if !userIDPattern.MatchString(u.ID) {
		return wire.User{}, invalid("user_id must be 1 to 63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit")
	}
	if u.Kind == "" {
		u.Kind = "service"
	}
	switch {
	case u.Kind != "service" && u.Kind != "human":
		return wire.User{}, invalid("kind must be service or human")
	case u.Kind == "human" && (u.Issuer == "" || u.Subject == ""):
		return wire.User{}, invalid("a human user needs the issuer and subject its identity provider knows them by")
	case u.Kind == "service" && (u.Issuer != "" || u.Subject != ""):
		return wire.User{}, invalid("a service user has no issuer or subject")
	case req.Role == nil:
		return wire.User{}, invalid("role is required (one of admin, member, viewer)")
	}
	if err := applyUserChanges(u, req); err != nil {
		return wire.User{}, err
	}
	if err := a.st.CreateUser(ctx, u); errors.Is(err, store.ErrConflict) {
		return wire.User{}, sandbox.Errorf(sandbox.CodeAlreadyExists, "user %q (or that issuer and subject) exists", u.ID)
	} else if err != nil {
		return wire.User{}, fmt.Errorf("create user: %w", err)
	}
	a.Record(ctx, actor, "user.create", "user:"+u.ID, map[string]any{"role": u.Role, "kind": u.Kind})
	return ToUser(u), nil
}

// applyUserChanges sets the fields req gives.
func applyUserChanges(u *store.User, req wire.UserRequest) error {
	if req.Role != nil {
		if !Role(*req.Role).Valid() {
			return invalid("role %q is not one of admin, member, viewer", *req.Role)
		}
		u.Role = *req.Role
	}
	if req.Email != nil {
		if len(*req.Email) > 320 {
			return invalid("email exceeds 320 characters")
		}
		u.Email = *req.Email
	}
	if req.DisplayName != nil {
		if len(*req.DisplayName) > 200 {
			return invalid("display_name exceeds 200 characters")
		}
		u.DisplayName = strings.TrimSpace(*req.DisplayName)
	}
	if req.Disabled != nil {
		u.Disabled = *req.Disabled
	}
	return nil
}

// UpdateUser changes a user's role, state or names. An administrator
// cannot demote or disable themselves (someone must be left to undo it).
func (a *Accounts) UpdateUser(ctx context.Context, actor *Principal, id string, req wire.UserRequest) (wire.User, error) {
	if req.ID != "" && req.ID != id || req.Kind != "" || req.Issuer != "" || req.Subject != "" {
		return wire.User{}, invalid("user_id, kind, issuer and subject cannot change")
	}
	if id == actor.UserID && (req.Role != nil && *req.Role != string(actor.Role) || req.Disabled != nil && *req.Disabled) {
		return wire.User{}, Forbidden("an administrator cannot change their own role or disable themselves")
	}
	u, err := a.user(ctx, id)
	if err != nil {
		return wire.User{}, err
	}
	before := *u
	if err := applyUserChanges(u, req); err != nil {
		return wire.User{}, err
	}
	if err := a.st.UpdateUser(ctx, u); errors.Is(err, store.ErrConflict) {
		return wire.User{}, sandbox.Errorf(sandbox.CodeConflict, "user %q changed meanwhile; read it and try again", id)
	} else if err != nil {
		return wire.User{}, fmt.Errorf("update user: %w", err)
	}
	a.forget("", id)
	if before.Role != u.Role {
		a.Record(ctx, actor, "user.set_role", "user:"+id, map[string]any{"from": before.Role, "to": u.Role})
	}
	if before.Disabled != u.Disabled {
		a.Record(ctx, actor, map[bool]string{true: "user.disable", false: "user.enable"}[u.Disabled], "user:"+id, nil)
	}
	return ToUser(u), nil
}

// ListKeys returns a user's keys, revoked ones included.
func (a *Accounts) ListKeys(ctx context.Context, userID string) ([]wire.APIKey, error) {
	ks, err := a.st.ListAPIKeys(ctx, userID)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	out := make([]wire.APIKey, len(ks))
	for i, k := range ks {
		out[i] = ToAPIKey(k)
	}
	return out, nil
}

// CreateKey makes a key of user userID on the actor's behalf. Its scopes
// may exceed neither the user's role nor the actor's own scopes (default:
// both's common scopes); its life is bounded by MaxKeyLifetime.
func (a *Accounts) CreateKey(ctx context.Context, actor *Principal, userID string, req wire.APIKeyRequest) (wire.NewAPIKey, error) {
	u, err := a.user(ctx, userID)
	if err != nil {
		return wire.NewAPIKey{}, err
	}
	req.Name = strings.TrimSpace(req.Name)
	if req.Name == "" || len(req.Name) > 100 {
		return wire.NewAPIKey{}, invalid("name is required (at most 100 characters)")
	}
	// A key holds at most what its user's role grants and what the
	// request making it may do itself: no key mints a stronger one.
	roleScopes := RoleScopes(Role(u.Role))
	if actor != nil {
		roleScopes = Intersect(roleScopes, actor.Scopes)
	}
	scopes := req.Scopes
	if scopes == nil {
		for _, s := range roleScopes {
			scopes = append(scopes, string(s))
		}
	}
	if len(scopes) == 0 {
		return wire.NewAPIKey{}, invalid("scopes must name at least one of read, write, admin")
	}
	for _, s := range scopes {
		if !Scope(s).Valid() {
			return wire.NewAPIKey{}, invalid("scope %q is not one of read, write, admin", s)
		}
		if !slices.Contains(roleScopes, Scope(s)) {
			return wire.NewAPIKey{}, Forbidden("scope %q exceeds the %s role of user %q or the scopes of the request making the key", s, u.Role, u.ID)
		}
	}
	expires, err := a.keyExpiry(req)
	if err != nil {
		return wire.NewAPIKey{}, err
	}
	id, key, hash := NewKey()
	k := &store.APIKey{ID: id, UserID: u.ID, Name: req.Name, SecretHash: hash[:], Scopes: slices.Compact(slices.Sorted(slices.Values(scopes))), ExpiresAt: expires}
	if err := a.st.CreateAPIKey(ctx, k); err != nil {
		return wire.NewAPIKey{}, fmt.Errorf("create api key: %w", err)
	}
	a.Record(ctx, actor, "api_key.create", "api_key:"+id, map[string]any{"user_id": u.ID, "scopes": k.Scopes, "name": k.Name})
	return wire.NewAPIKey{APIKey: ToAPIKey(k), Key: key}, nil
}

// keyExpiry returns when a key asked for by req expires (nil: never).
func (a *Accounts) keyExpiry(req wire.APIKeyRequest) (*time.Time, error) {
	now := a.cfg.Now().UTC()
	var expires *time.Time
	switch {
	case req.ExpiresAt != nil && req.ExpiresInSeconds != 0:
		return nil, invalid("give expires_at or expires_in_seconds, not both")
	case req.ExpiresInSeconds < 0:
		return nil, invalid("expires_in_seconds must be positive")
	case req.ExpiresInSeconds > 0:
		t := now.Add(time.Duration(req.ExpiresInSeconds) * time.Second)
		expires = &t
	case req.ExpiresAt != nil:
		if !req.ExpiresAt.After(now) {
			return nil, invalid("expires_at is in the past")
		}
		expires = req.ExpiresAt
	}
	if maxLife := a.cfg.MaxKeyLifetime; maxLife > 0 {
		limit := now.Add(maxLife)
		if expires == nil {
			expires = &limit
		} else if expires.After(limit) {
			return nil, invalid("a key may live at most %s on this server", maxLife)
		}
	}
	return expires, nil
}

// RevokeKey revokes key keyID of user userID (NOT_FOUND when the key is
// another user's).
func (a *Accounts) RevokeKey(ctx context.Context, actor *Principal, userID, keyID string) (wire.APIKey, error) {
	k, err := a.st.GetAPIKey(ctx, keyID)
	if errors.Is(err, store.ErrNotFound) || err == nil && k.UserID != userID {
		return wire.APIKey{}, sandbox.Errorf(sandbox.CodeNotFound, "API key %q not found", keyID)
	}
	if err != nil {
		return wire.APIKey{}, fmt.Errorf("get api key: %w", err)
	}
	k, err = a.st.RevokeAPIKey(ctx, keyID, a.cfg.Now())
	if err != nil {
		return wire.APIKey{}, fmt.Errorf("revoke api key: %w", err)
	}
	a.forget(keyID, "")
	a.Record(ctx, actor, "api_key.revoke", "api_key:"+keyID, map[string]any{"user_id": userID})
	return ToAPIKey(k), nil
}

func (a *Accounts) forget(keyID, userID string) {
	if a.cfg.Auth != nil {
		a.cfg.Auth.Forget(keyID, userID)
	}
}

// Record appends a security-relevant action to the audit log: actor did
// action to target, with detail (a JSON object, never a secret). A
// failure is logged, never the action's.
func (a *Accounts) Record(ctx context.Context, actor *Principal, action, target string, detail map[string]any) {
	e := &store.AuditEntry{Action: action, Target: target, RequestID: RequestIDFrom(ctx)}
	if actor != nil {
		e.ActorID = actor.UserID
	}
	if detail != nil {
		e.Detail, _ = json.Marshal(detail)
	}
	if err := a.st.AppendAudit(ctx, e); err != nil {
		a.cfg.Logger.Error("audit log append failed", "action", action, "target", target, "err", err)
	}
}

// ListAudit returns the entries f selects, newest first, and the cursor
// of the next page ("" on the last).
func (a *Accounts) ListAudit(ctx context.Context, f store.AuditFilter) ([]wire.AuditEntry, string, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 100
	}
	limit := f.Limit
	f.Limit++
	es, err := a.st.ListAudit(ctx, f)
	if err != nil {
		return nil, "", fmt.Errorf("list audit: %w", err)
	}
	next := ""
	if len(es) > limit {
		es = es[:limit]
		next = fmt.Sprint(es[limit-1].Seq)
	}
	out := make([]wire.AuditEntry, len(es))
	for i, e := range es {
		out[i] = wire.AuditEntry{Seq: e.Seq, At: e.At, ActorID: e.ActorID, Action: e.Action, Target: e.Target,
			RequestID: e.RequestID, Detail: e.Detail}
	}
	return out, next, nil
}
