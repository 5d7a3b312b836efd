package identity

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// BootstrapUserID is the service user that owns the bootstrap key (the
// server's configured or generated API key) and is created, as an
// administrator, on the first start.
const BootstrapUserID = "admin"

// DefaultOrgID is the organization of every user of a deployment (tenants
// are separate deployments for now).
const DefaultOrgID = "default"

// Records is what the Authenticator reads and writes of the store.
type Records interface {
	GetUser(ctx context.Context, id string) (*store.User, error)
	CreateUser(ctx context.Context, u *store.User) error
	GetAPIKey(ctx context.Context, id string) (*store.APIKey, error)
	TouchAPIKey(ctx context.Context, id string, at time.Time) error
}

// Config configures an Authenticator.
type Config struct {
	Records Records
	// BootstrapKeyHash is the SHA-256 of the bootstrap key, which acts as
	// BootstrapUserID with every scope of that user's role.
	BootstrapKeyHash [32]byte
	// Insecure authenticates every request, keyed or not, as
	// BootstrapUserID (an explicit opt-in for local experiments).
	Insecure bool
	// TTL bounds how old a cached key or user record may be when it
	// decides a request (default 500 ms): a revocation, a demotion or a
	// disabled user takes effect everywhere within it.
	TTL time.Duration
	// TouchEvery bounds how often a key's last use is written (default a
	// minute).
	TouchEvery time.Duration
	// LookupTimeout bounds one read of a key or a user from the store
	// (default 5 s): a store that does not answer fails the request with
	// UNAVAILABLE instead of holding it.
	LookupTimeout time.Duration
	Logger        *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticator turns a presented key into a Principal. It is safe for
// concurrent use.
type Authenticator struct {
	cfg Config

	mu      sync.Mutex
	keys    map[string]cached[*store.APIKey]
	users   map[string]cached[*store.User]
	web     map[string]cached[*store.WebSession]
	touched map[string]time.Time
}

// cached is a record (nil: known to be absent) read at a time.
type cached[T any] struct {
	rec T
	at  time.Time
}

// maxCached bounds each cache; past it the cache starts afresh (a flood of
// made-up key ids costs store reads, never memory).
const maxCached = 10000

// New returns an Authenticator.
func New(cfg Config) *Authenticator {
	if cfg.TTL <= 0 {
		cfg.TTL = 500 * time.Millisecond
	}
	if cfg.TouchEvery <= 0 {
		cfg.TouchEvery = time.Minute
	}
	if cfg.LookupTimeout <= 0 {
		cfg.LookupTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Authenticator{cfg: cfg, keys: map[string]cached[*store.APIKey]{},
		users: map[string]cached[*store.User]{}, web: map[string]cached[*store.WebSession]{}, touched: map[string]time.Time{}}
}

// EnsureBootstrapUser creates BootstrapUserID, a service administrator,
// unless it exists.
func EnsureBootstrapUser(ctx context.Context, r Records) error {
	_, err := r.GetUser(ctx, BootstrapUserID)
	if err == nil {
		return nil
	}
	if !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("bootstrap user: %w", err)
	}
	u := &store.User{ID: BootstrapUserID, Kind: "service", DisplayName: "Bootstrap administrator",
		Role: string(RoleAdmin), OrgID: DefaultOrgID}
	if err := r.CreateUser(ctx, u); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("bootstrap user: %w", err)
	}
	return nil
}

// Authenticate returns the principal key acts as. A missing, malformed,
// unknown or revoked key, or one of a disabled or deleted user, is
// UNAUTHORIZED with one message; an expired key is TOKEN_EXPIRED. Other
// errors are the store's.
func (a *Authenticator) Authenticate(ctx context.Context, key string) (*Principal, error) {
	if a.cfg.Insecure {
		return a.principal(ctx, BootstrapUserID, "", nil)
	}
	if key == "" {
		return nil, Unauthorized()
	}
	id, secret, ok := ParseKey(key)
	if !ok {
		if !a.IsBootstrapKey(key) {
			return nil, Unauthorized()
		}
		return a.principal(ctx, BootstrapUserID, "", nil)
	}
	k, err := a.key(ctx, id)
	if err != nil {
		return nil, err
	}
	want := HashSecret(secret)
	if k == nil || subtle.ConstantTimeCompare(want[:], k.SecretHash) != 1 || k.RevokedAt != nil {
		return nil, Unauthorized()
	}
	now := a.cfg.Now()
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return nil, sandbox.Errorf(CodeTokenExpired, "API key expired")
	}
	scopes := make([]Scope, len(k.Scopes))
	for i, s := range k.Scopes {
		scopes[i] = Scope(s)
	}
	p, err := a.principal(ctx, k.UserID, k.ID, scopes)
	if err != nil {
		return nil, err
	}
	a.touch(ctx, k.ID, now)
	return p, nil
}

// PrincipalOf returns the principal of user userID with every scope of
// their role (a browser session's), or UNAUTHORIZED when the user is
// absent or disabled.
func (a *Authenticator) PrincipalOf(ctx context.Context, userID string) (*Principal, error) {
	return a.principal(ctx, userID, "", nil)
}

// principal builds the principal of userID through key keyID with
// keyScopes (nil: all of the role's).
func (a *Authenticator) principal(ctx context.Context, userID, keyID string, keyScopes []Scope) (*Principal, error) {
	u, err := a.user(ctx, userID)
	if err != nil {
		return nil, err
	}
	if u == nil && userID == BootstrapUserID {
		// Not created yet (EnsureBootstrapUser runs when a server starts):
		// the bootstrap key is an administrator's from the first request.
		u = &store.User{ID: BootstrapUserID, Role: string(RoleAdmin), OrgID: DefaultOrgID}
	}
	if u == nil || u.Disabled {
		return nil, Unauthorized()
	}
	role := Role(u.Role)
	scopes := RoleScopes(role)
	if keyScopes != nil {
		scopes = Intersect(keyScopes, scopes)
	}
	return &Principal{UserID: u.ID, Role: role, Scopes: scopes, KeyID: keyID, OrgID: u.OrgID}, nil
}

// Forget drops what is cached of a key or a user (either may be ""), so
// that a change made on this replica takes effect here at once.
func (a *Authenticator) Forget(keyID, userID string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.keys, keyID)
	delete(a.users, userID)
}

func (a *Authenticator) key(ctx context.Context, id string) (*store.APIKey, error) {
	return lookup(a, a.keys, id, func() (*store.APIKey, error) {
		ctx, cancel := context.WithTimeout(ctx, a.cfg.LookupTimeout)
		defer cancel()
		return a.cfg.Records.GetAPIKey(ctx, id)
	})
}

func (a *Authenticator) user(ctx context.Context, id string) (*store.User, error) {
	return lookup(a, a.users, id, func() (*store.User, error) {
		ctx, cancel := context.WithTimeout(ctx, a.cfg.LookupTimeout)
		defer cancel()
		return a.cfg.Records.GetUser(ctx, id)
	})
}

// IsBootstrapKey reports whether key is the bootstrap key, comparing
// hashes in memory only (for what must not wait on the store, such as
// how much of /readyz a caller sees).
func (a *Authenticator) IsBootstrapKey(key string) bool {
	if key == "" {
		return false
	}
	got := sha256.Sum256([]byte(key))
	return subtle.ConstantTimeCompare(got[:], a.cfg.BootstrapKeyHash[:]) == 1
}

// lookup returns the record of id from cache when it is younger than the
// TTL, and from read otherwise (nil when read finds none).
func lookup[T any](a *Authenticator, cache map[string]cached[*T], id string, read func() (*T, error)) (*T, error) {
	now := a.cfg.Now()
	a.mu.Lock()
	c, ok := cache[id]
	a.mu.Unlock()
	if ok && now.Sub(c.at) < a.cfg.TTL {
		return c.rec, nil
	}
	rec, err := read()
	if errors.Is(err, store.ErrNotFound) {
		rec, err = nil, nil
	}
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "the store cannot be reached to authenticate the request: %w", err)
	}
	a.mu.Lock()
	if len(cache) >= maxCached {
		clear(cache)
	}
	cache[id] = cached[*T]{rec: rec, at: now}
	a.mu.Unlock()
	return rec, nil
}

// touch records the key's use at most once per TouchEvery; a failure is
// logged, never the request's.
func (a *Authenticator) touch(ctx context.Context, id string, now time.Time) {
	a.mu.Lock()
	due := now.Sub(a.touched[id]) >= a.cfg.TouchEvery
	if due {
		if len(a.touched) >= maxCached {
			clear(a.touched)
		}
		a.touched[id] = now
	}
	a.mu.Unlock()
	if !due {
		return
	}
	if err := a.cfg.Records.TouchAPIKey(ctx, id, now); err != nil {
		a.cfg.Logger.Warn("record an API key's last use", "key_id", id, "err", err)
	}
}
