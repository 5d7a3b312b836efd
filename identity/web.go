package identity

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store"
)

// A browser signs in once (through an identity provider) and then carries
// a session cookie: a random value whose SHA-256 names a server-side
// store.WebSession. Signing out deletes the record, which ends the
// session on every replica within the Authenticator's TTL.

// WebRecords is what browser sessions keep in the store.
type WebRecords interface {
	CreateWebSession(ctx context.Context, s *store.WebSession) error
	GetWebSession(ctx context.Context, id string) (*store.WebSession, error)
	DeleteWebSession(ctx context.Context, id string) error
}

// ErrFlowUsed is StartWebSession's refusal of a sign-in flow that already
// made a session (a replayed callback).
var ErrFlowUsed = errors.New("identity: the sign-in flow was already used")

// webSessionID returns the stored id of a cookie value.
func webSessionID(value string) string {
	h := sha256.Sum256([]byte(value))
	return hex.EncodeToString(h[:])
}

// StartWebSession makes a session of user userID from sign-in flow
// flowID, living ttl, and returns the cookie's value (random, new at every
// sign-in) and when it expires. A flow that made a session before is
// ErrFlowUsed.
func (a *Authenticator) StartWebSession(ctx context.Context, userID, flowID string, ttl time.Duration) (string, time.Time, error) {
	wr, ok := a.cfg.Records.(WebRecords)
	if !ok {
		return "", time.Time{}, errors.New("identity: the store keeps no browser sessions")
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	value := base64.RawURLEncoding.EncodeToString(b)
	now := a.cfg.Now().UTC()
	s := &store.WebSession{ID: webSessionID(value), UserID: userID, FlowID: flowID, CreatedAt: now, ExpiresAt: now.Add(ttl)}
	if err := wr.CreateWebSession(ctx, s); errors.Is(err, store.ErrConflict) {
		return "", time.Time{}, ErrFlowUsed
	} else if err != nil {
		return "", time.Time{}, fmt.Errorf("start web session: %w", err)
	}
	return value, s.ExpiresAt, nil
}

// AuthenticateWebSession returns the principal of a session cookie's
// value: the user's with every scope of their current role. An unknown,
// ended or expired session, or a disabled user's, is UNAUTHORIZED.
func (a *Authenticator) AuthenticateWebSession(ctx context.Context, value string) (*Principal, error) {
	wr, ok := a.cfg.Records.(WebRecords)
	if !ok || value == "" || len(value) > 128 {
		return nil, Unauthorized()
	}
	id := webSessionID(value)
	s, err := lookup(a, a.web, id, func() (*store.WebSession, error) {
		ctx, cancel := context.WithTimeout(ctx, a.cfg.LookupTimeout)
		defer cancel()
		return wr.GetWebSession(ctx, id)
	})
	if err != nil {
		return nil, err
	}
	if s == nil || !a.cfg.Now().Before(s.ExpiresAt) {
		return nil, Unauthorized()
	}
	return a.principal(ctx, s.UserID, "", nil)
}

// EndWebSession deletes the session of a cookie's value (signing out); an
// unknown one is not an error.
func (a *Authenticator) EndWebSession(ctx context.Context, value string) error {
	wr, ok := a.cfg.Records.(WebRecords)
	if !ok || value == "" {
		return nil
	}
	id := webSessionID(value)
	a.mu.Lock()
	delete(a.web, id)
	a.mu.Unlock()
	if err := wr.DeleteWebSession(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("end web session: %w", err)
	}
	return nil
}

// External is a person as an identity provider (or an authenticating
// gateway) names them.
type External struct {
	Issuer  string
	Subject string
	Email   string
	Name    string
	// Admin is true when the provider's groups make the person an
	// administrator (see SignIn).
	Admin bool
}

// SignIn returns the user an identity provider's person is: created on
// their first sign-in (role admin when ext.Admin, else defaultRole),
// their email and name refreshed and their sign-in time recorded on every
// later one. The provider's groups decide administration at every
// sign-in: ext.Admin makes the user an administrator, and an
// administrator whose groups no longer say so becomes defaultRole; a role
// an administrator gave (member, viewer) is otherwise kept. A disabled
// user is UNAUTHORIZED. The caller records the sign-in (RecordSignIn) once
// it holds: a session made, a gateway's request served.
func (a *Accounts) SignIn(ctx context.Context, ext External, defaultRole Role) (*store.User, error) {
	if ext.Issuer == "" || ext.Subject == "" {
		return nil, Unauthorized()
	}
	now := a.cfg.Now().UTC()
	role := defaultRole
	if ext.Admin {
		role = RoleAdmin
	}
	for range 3 { // a concurrent first sign-in or update: read again
		u, err := a.st.GetUserBySubject(ctx, ext.Issuer, ext.Subject)
		if errors.Is(err, store.ErrNotFound) {
			u = &store.User{ID: "usr_" + randomString(12), Kind: "human", Issuer: ext.Issuer, Subject: ext.Subject,
				Email: ext.Email, DisplayName: ext.Name, Role: string(role), OrgID: DefaultOrgID, LastLoginAt: &now}
			err = a.st.CreateUser(ctx, u)
			if errors.Is(err, store.ErrConflict) {
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("sign in: %w", err)
			}
			a.Record(ctx, &Principal{UserID: u.ID}, "user.create", "user:"+u.ID, map[string]any{"role": u.Role, "issuer": u.Issuer})
			return u, nil
		}
		if err != nil {
			return nil, fmt.Errorf("sign in: %w", err)
		}
		if u.Disabled {
			return nil, Unauthorized()
		}
		before := u.Role
		switch {
		case ext.Admin:
			u.Role = string(RoleAdmin)
		case u.Role == string(RoleAdmin):
			u.Role = string(defaultRole)
		}
		u.Email, u.DisplayName, u.LastLoginAt = ext.Email, ext.Name, &now
		if err := a.st.UpdateUser(ctx, u); errors.Is(err, store.ErrConflict) {
			continue
		} else if err != nil {
			return nil, fmt.Errorf("sign in: %w", err)
		}
		a.forget("", u.ID)
		if before != u.Role {
			a.Record(ctx, &Principal{UserID: u.ID}, "user.set_role", "user:"+u.ID, map[string]any{"from": before, "to": u.Role, "by": "groups"})
		}
		return u, nil
	}
	return nil, errors.New("sign in: the user record kept changing")
}

// RecordSignIn appends user userID's sign-in through via ("oidc",
// "gateway") to the audit log.
func (a *Accounts) RecordSignIn(ctx context.Context, userID, via string) {
	a.Record(ctx, &Principal{UserID: userID}, "user.sign_in", "user:"+userID, map[string]any{"via": via})
}
