package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// newUser returns a complete person's record with the given id.
func newUser(id string) *store.User {
	return &store.User{ID: id, Kind: "human", Issuer: "https://idp.example", Subject: "sub-" + id,
		Email: id + "@example.com", DisplayName: "User " + id, Role: "member", OrgID: "default",
		CreatedAt: t0, LastLoginAt: ptr(at(time.Minute))}
}

// checkUser fails t unless got is want read back.
func checkUser(t *testing.T, got, want *store.User) {
	t.Helper()
	if got.ID != want.ID || got.Kind != want.Kind || got.Issuer != want.Issuer || got.Subject != want.Subject ||
		got.Email != want.Email || got.DisplayName != want.DisplayName || got.Role != want.Role ||
		got.Disabled != want.Disabled || got.OrgID != want.OrgID || got.Version != want.Version {
		t.Errorf("user = %+v, want %+v", got, want)
	}
	checkTime(t, "user created_at", got.CreatedAt, want.CreatedAt)
	checkOptTime(t, "user last_login_at", got.LastLoginAt, want.LastLoginAt)
}

// checkOptTime fails t unless got and want are both nil or the same time.
func checkOptTime(t *testing.T, what string, got, want *time.Time) {
	t.Helper()
	switch {
	case got == nil && want == nil:
	case got == nil || want == nil:
		t.Errorf("%s = %v, want %v", what, got, want)
	default:
		checkTime(t, what, *got, *want)
	}
}

func testUsers(t *testing.T, st store.Store) {
	ctx := t.Context()
	alice := newUser("alice")
	if err := st.CreateUser(ctx, alice); err != nil {
		t.Fatalf("create: %v", err)
	}
	if alice.Version != 1 {
		t.Errorf("version after create = %d, want 1", alice.Version)
	}
	svc := &store.User{ID: "admin", Kind: "service", Role: "admin", OrgID: "default"}
	if err := st.CreateUser(ctx, svc); err != nil {
		t.Fatalf("create service user: %v", err)
	}
	if svc.CreatedAt.IsZero() {
		t.Error("a zero CreatedAt was not set")
	}
	// Two service users share the empty (issuer, subject).
	if err := st.CreateUser(ctx, &store.User{ID: "ci", Kind: "service", Role: "member", OrgID: "default"}); err != nil {
		t.Fatalf("create a second service user: %v", err)
	}

	got, err := st.GetUser(ctx, "alice")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	checkUser(t, got, alice)
	got, err = st.GetUserBySubject(ctx, alice.Issuer, alice.Subject)
	if err != nil {
		t.Fatalf("get by subject: %v", err)
	}
	checkUser(t, got, alice)
	_, err = st.GetUserBySubject(ctx, alice.Issuer, "sub-nobody")
	checkErr(t, "get by unknown subject", err, store.ErrNotFound)
	_, err = st.GetUserBySubject(ctx, "", "")
	checkErr(t, "get by empty subject", err, store.ErrNotFound)
	_, err = st.GetUser(ctx, "nobody")
	checkErr(t, "get unknown", err, store.ErrNotFound)

	err = st.CreateUser(ctx, newUser("alice"))
	checkErr(t, "create with a taken id", err, store.ErrConflict)
	twin := newUser("alice2")
	twin.Subject = alice.Subject
	err = st.CreateUser(ctx, twin)
	checkErr(t, "create with a taken (issuer, subject)", err, store.ErrConflict)
	if _, err := st.GetUser(ctx, "alice2"); err == nil {
		t.Error("a refused create left a record")
	}
}

func testUserUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	u := newUser("bob")
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatalf("create: %v", err)
	}
	stale := *u
	u.Role, u.Disabled, u.Email, u.DisplayName = "viewer", true, "b@example.org", "Bob"
	u.LastLoginAt = ptr(at(time.Hour))
	u.Subject, u.Issuer, u.CreatedAt = "changed", "changed", at(time.Hour) // kept as stored
	if err := st.UpdateUser(ctx, u); err != nil {
		t.Fatalf("update: %v", err)
	}
	want := newUser("bob")
	want.Role, want.Disabled, want.Email, want.DisplayName = "viewer", true, "b@example.org", "Bob"
	want.LastLoginAt, want.Version = ptr(at(time.Hour)), 2
	checkUser(t, u, want)
	got, err := st.GetUser(ctx, "bob")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	checkUser(t, got, want)
	checkErr(t, "update from a stale version", st.UpdateUser(ctx, &stale), store.ErrConflict)
	checkErr(t, "update unknown", st.UpdateUser(ctx, &store.User{ID: "nobody", Version: 1}), store.ErrNotFound)

	// Of concurrent updates from one version exactly one passes.
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		passed int
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := *got
			c.DisplayName = fmt.Sprint("racer ", i)
			if err := st.UpdateUser(ctx, &c); err == nil {
				mu.Lock()
				passed++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if passed != 1 {
		t.Errorf("%d concurrent updates from one version passed, want 1", passed)
	}
}

func testUserList(t *testing.T, st store.Store) {
	ctx := t.Context()
	for _, id := range []string{"c", "a", "B", "b"} {
		if err := st.CreateUser(ctx, newUser(id)); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	var all []string
	after := ""
	for {
		page, err := st.ListUsers(ctx, after, 3)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		if len(page) > 3 {
			t.Fatalf("page of %d users, limit 3", len(page))
		}
		for _, u := range page {
			all = append(all, u.ID)
		}
		if len(page) < 3 {
			break
		}
		after = page[len(page)-1].ID
	}
	if want := []string{"B", "a", "b", "c"}; !slices.Equal(all, want) {
		t.Errorf("users listed as %v, want %v", all, want)
	}
}

func testAPIKeys(t *testing.T, st store.Store) {
	ctx := t.Context()
	hash := bytes.Repeat([]byte{0xab, 0}, 16)
	k := &store.APIKey{ID: "k2", UserID: "alice", Name: "ci", SecretHash: hash, Scopes: []string{"read", "write"},
		CreatedAt: t0, ExpiresAt: ptr(at(24 * time.Hour))}
	if err := st.CreateAPIKey(ctx, k); err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, other := range []*store.APIKey{
		{ID: "k1", UserID: "alice", Name: "laptop", SecretHash: hash, Scopes: []string{"read"}},
		{ID: "k3", UserID: "bob", Name: "bob's", SecretHash: hash, Scopes: nil},
	} {
		if err := st.CreateAPIKey(ctx, other); err != nil {
			t.Fatalf("create %s: %v", other.ID, err)
		}
	}
	checkErr(t, "create with a taken id", st.CreateAPIKey(ctx, &store.APIKey{ID: "k2", UserID: "bob", SecretHash: hash}), store.ErrConflict)

	got, err := st.GetAPIKey(ctx, "k2")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.UserID != "alice" || got.Name != "ci" || !bytes.Equal(got.SecretHash, hash) ||
		!slices.Equal(got.Scopes, []string{"read", "write"}) || got.RevokedAt != nil || got.LastUsedAt != nil {
		t.Errorf("key = %+v", got)
	}
	checkTime(t, "key created_at", got.CreatedAt, t0)
	checkOptTime(t, "key expires_at", got.ExpiresAt, ptr(at(24*time.Hour)))
	if k3, err := st.GetAPIKey(ctx, "k3"); err != nil || k3.Scopes == nil || len(k3.Scopes) != 0 {
		t.Errorf("key with nil scopes read back as %+v, %v; want empty, non-nil scopes", k3, err)
	}
	_, err = st.GetAPIKey(ctx, "nope")
	checkErr(t, "get unknown", err, store.ErrNotFound)

	list, err := st.ListAPIKeys(ctx, "alice")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var ids []string
	for _, k := range list {
		ids = append(ids, k.ID)
	}
	if !slices.Equal(ids, []string{"k1", "k2"}) {
		t.Errorf("alice's keys = %v, want [k1 k2]", ids)
	}

	// Last use only moves forward.
	if err := st.TouchAPIKey(ctx, "k2", at(time.Hour)); err != nil {
		t.Fatalf("touch: %v", err)
	}
	if err := st.TouchAPIKey(ctx, "k2", at(time.Minute)); err != nil {
		t.Fatalf("touch earlier: %v", err)
	}
	got, _ = st.GetAPIKey(ctx, "k2")
	checkOptTime(t, "last_used_at after an earlier touch", got.LastUsedAt, ptr(at(time.Hour)))
	checkErr(t, "touch unknown", st.TouchAPIKey(ctx, "nope", t0), store.ErrNotFound)

	// Revocation keeps its first time.
	rev, err := st.RevokeAPIKey(ctx, "k2", at(2*time.Hour))
	if err != nil {
		t.Fatalf("revoke: %v", err)
	}
	checkOptTime(t, "revoked_at", rev.RevokedAt, ptr(at(2*time.Hour)))
	rev, err = st.RevokeAPIKey(ctx, "k2", at(3*time.Hour))
	if err != nil {
		t.Fatalf("revoke again: %v", err)
	}
	checkOptTime(t, "revoked_at after a second revoke", rev.RevokedAt, ptr(at(2*time.Hour)))
	_, err = st.RevokeAPIKey(ctx, "nope", t0)
	checkErr(t, "revoke unknown", err, store.ErrNotFound)
}

func testAudit(t *testing.T, st store.Store) {
	ctx := t.Context()
	if es, err := st.ListAudit(ctx, store.AuditFilter{}); err != nil || len(es) != 0 {
		t.Fatalf("audit of an empty store = %v, %v", es, err)
	}
	entries := []store.AuditEntry{
		{ActorID: "admin", Action: "user.create", Target: "user:alice", RequestID: "r1", At: t0, Detail: json.RawMessage(`{"role":"member"}`)},
		{ActorID: "alice", Action: "api_key.create", Target: "api_key:k1", RequestID: "r2", At: at(time.Minute)},
		{ActorID: "admin", Action: "user.set_role", Target: "user:alice", RequestID: "r3", At: at(2 * time.Minute)},
		{ActorID: "alice", Action: "api_key.revoke", Target: "api_key:k1", RequestID: "r4", At: at(3 * time.Minute)},
		{ActorID: "admin", Action: "api_keys.list", Target: "user:alice", RequestID: "r5"},
	}
	var last int64
	for i := range entries {
		if err := st.AppendAudit(ctx, &entries[i]); err != nil {
			t.Fatalf("append: %v", err)
		}
		if entries[i].Seq <= last {
			t.Errorf("seq %d after %d: not increasing", entries[i].Seq, last)
		}
		last = entries[i].Seq
	}
	if entries[4].At.IsZero() {
		t.Error("a zero At was not set")
	}
	seqs := func(es []store.AuditEntry) []int64 {
		var out []int64
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	s := seqs(entries)
	for _, tc := range []struct {
		name string
		f    store.AuditFilter
		want []int64
	}{
		{"all, newest first", store.AuditFilter{}, []int64{s[4], s[3], s[2], s[1], s[0]}},
		{"actor", store.AuditFilter{ActorID: "alice"}, []int64{s[3], s[1]}},
		{"action", store.AuditFilter{Action: "user.set_role"}, []int64{s[2]}},
		{"action prefix", store.AuditFilter{Action: "api_key."}, []int64{s[3], s[1]}},
		{"target", store.AuditFilter{Target: "user:alice"}, []int64{s[4], s[2], s[0]}},
		{"page", store.AuditFilter{Limit: 2}, []int64{s[4], s[3]}},
		{"next page", store.AuditFilter{Limit: 2, BeforeSeq: s[3]}, []int64{s[2], s[1]}},
		{"since", store.AuditFilter{Since: at(2 * time.Minute), Target: "api_key:k1"}, []int64{s[3]}},
	} {
		got, err := st.ListAudit(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(seqs(got), tc.want) {
			t.Errorf("%s: seqs %v, want %v", tc.name, seqs(got), tc.want)
		}
	}
	got, _ := st.ListAudit(ctx, store.AuditFilter{Target: "user:alice", Action: "user.create"})
	if len(got) != 1 || got[0].ActorID != "admin" || got[0].RequestID != "r1" || string(got[0].Detail) != `{"role":"member"}` {
		t.Errorf("entry = %+v", got)
	} else {
		checkTime(t, "audit at", got[0].At, t0)
	}
}

func testWebSessions(t *testing.T, st store.Store) {
	ctx := t.Context()
	s := &store.WebSession{ID: "h1", UserID: "alice", FlowID: "f1", CreatedAt: t0, ExpiresAt: at(time.Hour)}
	if err := st.CreateWebSession(ctx, s); err != nil {
		t.Fatalf("create: %v", err)
	}
	checkErr(t, "create with a taken id", st.CreateWebSession(ctx, &store.WebSession{ID: "h1", UserID: "x", FlowID: "f2", ExpiresAt: t0}), store.ErrConflict)
	checkErr(t, "create from a used flow", st.CreateWebSession(ctx, &store.WebSession{ID: "h2", UserID: "x", FlowID: "f1", ExpiresAt: t0}), store.ErrConflict)
	got, err := st.GetWebSession(ctx, "h1")
	if err != nil || got.UserID != "alice" || got.FlowID != "f1" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	checkTime(t, "created_at", got.CreatedAt, t0)
	checkTime(t, "expires_at", got.ExpiresAt, at(time.Hour))
	_, err = st.GetWebSession(ctx, "h2")
	checkErr(t, "get unknown", err, store.ErrNotFound)

	for i, u := range []string{"alice", "bob", "bob"} {
		ws := &store.WebSession{ID: fmt.Sprint("e", i), UserID: u, FlowID: fmt.Sprint("ef", i), ExpiresAt: at(time.Duration(i) * time.Minute)}
		if err := st.CreateWebSession(ctx, ws); err != nil {
			t.Fatal(err)
		}
	}
	// Expired before t0+30s: e0. Bob's: e1, e2. Alice's h1 stays.
	if err := st.DeleteWebSessionsBefore(ctx, at(30*time.Second), "bob"); err != nil {
		t.Fatalf("delete before: %v", err)
	}
	for id, want := range map[string]bool{"h1": true, "e0": false, "e1": false, "e2": false} {
		_, err := st.GetWebSession(ctx, id)
		if (err == nil) != want {
			t.Errorf("session %s kept = %v, want %v", id, err == nil, want)
		}
	}
	if err := st.DeleteWebSession(ctx, "h1"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	checkErr(t, "delete again", st.DeleteWebSession(ctx, "h1"), store.ErrNotFound)
}
