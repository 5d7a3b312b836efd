package identity_test

import (
	"context"
	"crypto/sha256"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// clock is a settable time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// countingRecords counts the store reads the Authenticator makes.
type countingRecords struct {
	store.Store
	mu    sync.Mutex
	reads int
}

func (c *countingRecords) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.GetAPIKey(ctx, id)
}

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// addKey stores a key of user with scopes and returns its text.
func addKey(t *testing.T, st store.Store, user string, scopes []string, expires *time.Time) (string, string) {
	t.Helper()
	id, key, hash := identity.NewKey()
	if err := st.CreateAPIKey(t.Context(), &store.APIKey{ID: id, UserID: user, Name: "k", SecretHash: hash[:],
		Scopes: scopes, ExpiresAt: expires}); err != nil {
		t.Fatal(err)
	}
	return id, key
}

func TestAuthenticate(t *testing.T) {
	ctx := t.Context()
	st := openStore(t)
	clk := &clock{t: time.Now()}
	if err := identity.EnsureBootstrapUser(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := identity.EnsureBootstrapUser(ctx, st); err != nil {
		t.Fatalf("a second start: %v", err)
	}
	for _, u := range []*store.User{
		{ID: "alice", Kind: "human", Issuer: "i", Subject: "a", Role: "member", OrgID: "default"},
		{ID: "vic", Kind: "human", Issuer: "i", Subject: "v", Role: "viewer", OrgID: "default"},
		{ID: "dan", Kind: "human", Issuer: "i", Subject: "d", Role: "admin", Disabled: true, OrgID: "default"},
	} {
		if err := st.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	a := identity.New(identity.Config{Records: st, BootstrapKeyHash: sha256.Sum256([]byte("bootstrap-secret")), Now: clk.Now})
	aliceKeyID, aliceKey := addKey(t, st, "alice", []string{"read", "write", "admin"}, nil)
	_, aliceRead := addKey(t, st, "alice", []string{"read"}, nil)
	_, vicKey := addKey(t, st, "vic", []string{"read", "write"}, nil)
	_, danKey := addKey(t, st, "dan", []string{"read"}, nil)
	_, expired := addKey(t, st, "alice", []string{"read"}, new(clk.Now().Add(-time.Second)))
	_, ghostKey := addKey(t, st, "ghost", []string{"read"}, nil)
	revokedID, revoked := addKey(t, st, "alice", []string{"read"}, nil)
	if _, err := st.RevokeAPIKey(ctx, revokedID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	forged := aliceKey[:len(aliceKey)-1] + map[bool]string{true: "b", false: "a"}[aliceKey[len(aliceKey)-1] == 'a']

	for _, tc := range []struct {
		name   string
		key    string
		user   string
		scopes []identity.Scope
		code   sandbox.Code
	}{
		{"bootstrap key", "bootstrap-secret", "admin", []identity.Scope{"read", "write", "admin"}, ""},
		{"member's key: admin scope dropped", aliceKey, "alice", []identity.Scope{"read", "write"}, ""},
		{"read-only key", aliceRead, "alice", []identity.Scope{"read"}, ""},
		{"viewer's write key reads only", vicKey, "vic", []identity.Scope{"read"}, ""},
		{"no key", "", "", nil, sandbox.CodeUnauthorized},
		{"wrong bootstrap", "bootstrap-secreT", "", nil, sandbox.CodeUnauthorized},
		{"forged secret", forged, "", nil, sandbox.CodeUnauthorized},
		{"unknown id", "abx_aaaaaaaaaaaa_" + aliceKey[len(aliceKey)-52:], "", nil, sandbox.CodeUnauthorized},
		{"revoked", revoked, "", nil, sandbox.CodeUnauthorized},
		{"disabled user", danKey, "", nil, sandbox.CodeUnauthorized},
		{"deleted user", ghostKey, "", nil, sandbox.CodeUnauthorized},
		{"expired", expired, "", nil, identity.CodeTokenExpired},
	} {
		p, err := a.Authenticate(ctx, tc.key)
		if tc.code != "" {
			if sandbox.CodeOf(err) != tc.code || p != nil {
				t.Errorf("%s: %v, %v; want %s", tc.name, p, err, tc.code)
			}
			continue
		}
		if err != nil || p.UserID != tc.user || !slices.Equal(p.Scopes, tc.scopes) {
			t.Errorf("%s: %+v, %v; want %s with %v", tc.name, p, err, tc.user, tc.scopes)
		}
	}
	// One message for every refusal: nothing says which part was wrong.
	_, e1 := a.Authenticate(ctx, revoked)
	_, e2 := a.Authenticate(ctx, forged)
	_, e3 := a.Authenticate(ctx, "nonsense")
	if sandbox.MessageOf(e1) != sandbox.MessageOf(e2) || sandbox.MessageOf(e2) != sandbox.MessageOf(e3) {
		t.Errorf("refusals differ: %q, %q, %q", sandbox.MessageOf(e1), sandbox.MessageOf(e2), sandbox.MessageOf(e3))
	}

	// Last use is recorded.
	k, _ := st.GetAPIKey(ctx, aliceKeyID)
	if k.LastUsedAt == nil {
		t.Error("last use of a used key not recorded")
	}
}

// A demotion, a disabled user or a revocation made elsewhere (another
// replica, straight in the store) decides requests once the cache's TTL
// has passed; a change made here, with Forget, at once.
func TestAuthorityFollowsTheRecords(t *testing.T) {
	ctx := t.Context()
	st := &countingRecords{Store: openStore(t)}
	clk := &clock{t: time.Now()}
	if err := st.CreateUser(ctx, &store.User{ID: "bob", Kind: "human", Issuer: "i", Subject: "b", Role: "admin", OrgID: "default"}); err != nil {
		t.Fatal(err)
	}
	keyID, key := addKey(t, st, "bob", []string{"read", "write", "admin"}, nil)
	a := identity.New(identity.Config{Records: st, TTL: time.Second, Now: clk.Now})
	mustScopes := func(what string, want ...identity.Scope) {
		t.Helper()
		p, err := a.Authenticate(ctx, key)
		if len(want) == 0 {
			if sandbox.CodeOf(err) != sandbox.CodeUnauthorized {
				t.Errorf("%s: %+v, %v; want UNAUTHORIZED", what, p, err)
			}
			return
		}
		if err != nil || !slices.Equal(p.Scopes, want) {
			t.Errorf("%s: %+v, %v; want %v", what, p, err, want)
		}
	}
	mustScopes("admin", "read", "write", "admin")
	reads := st.reads
	mustScopes("admin again", "read", "write", "admin")
	if st.reads != reads {
		t.Errorf("a second request within the TTL read the store")
	}

	u, _ := st.GetUser(ctx, "bob")
	u.Role = "viewer"
	if err := st.UpdateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	mustScopes("demoted, within the TTL", "read", "write", "admin")
	clk.Add(time.Second)
	mustScopes("demoted, after the TTL", "read")

	u.Disabled = true
	if err := st.UpdateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	a.Forget("", "bob")
	mustScopes("disabled, forgotten here")

	u.Disabled = false
	if err := st.UpdateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	a.Forget("", "bob")
	mustScopes("enabled again", "read")
	if _, err := st.RevokeAPIKey(ctx, keyID, clk.Now()); err != nil {
		t.Fatal(err)
	}
	clk.Add(time.Second)
	mustScopes("revoked, after the TTL")
}

func TestInsecureActsAsTheBootstrapAdmin(t *testing.T) {
	st := openStore(t)
	if err := identity.EnsureBootstrapUser(t.Context(), st); err != nil {
		t.Fatal(err)
	}
	a := identity.New(identity.Config{Records: st, Insecure: true})
	p, err := a.Authenticate(t.Context(), "")
	if err != nil || p.UserID != identity.BootstrapUserID || !p.IsAdmin() {
		t.Fatalf("insecure: %+v, %v", p, err)
	}
}
