package client_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/sandbox"
)

func ptr[T any](v T) *T { return &v }

// TestIdentity runs every identity call against a server: the bootstrap
// key's administrator makes a user and keys of theirs, the user acts with
// them within their key's scopes and their role, and the audit log shows
// what was done.
func TestIdentity(t *testing.T) {
	env, admin := newPlatform(t)
	ctx := testCtx(t)

	me, err := admin.CurrentUser(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if me.User.ID != "admin" || me.User.Role != client.RoleAdmin || me.KeyID != "" ||
		!slices.Equal(me.Scopes, []string{client.ScopeRead, client.ScopeWrite, client.ScopeAdmin}) {
		t.Fatalf("the bootstrap key is %+v", me)
	}

	alice, err := admin.CreateUser(ctx, client.UserRequest{ID: "alice", Role: ptr(client.RoleMember), Email: ptr("alice@example.com"), DisplayName: ptr("Alice")})
	if err != nil {
		t.Fatal(err)
	}
	if alice.ID != "alice" || alice.Kind != client.UserService || alice.Role != client.RoleMember || alice.Disabled || alice.Email != "alice@example.com" || alice.Version < 1 {
		t.Fatalf("created %+v", alice)
	}
	human, err := admin.CreateUser(ctx, client.UserRequest{Kind: client.UserHuman, Issuer: "https://idp.example.com", Subject: "1234", Role: ptr(client.RoleViewer)})
	if err != nil {
		t.Fatal(err)
	}
	if human.ID == "" || human.Kind != client.UserHuman || human.Subject != "1234" {
		t.Fatalf("created %+v", human)
	}
	if got, err := admin.GetUser(ctx, "alice"); err != nil || got.DisplayName != "Alice" || got.Version != alice.Version {
		t.Fatalf("get user %+v, %v", got, err)
	}

	// Users page by id: admin, alice and the generated one, one a page.
	var ids []string
	page, pages := client.PageOptions{Limit: 1}, 0
	for {
		p, err := admin.ListUsers(ctx, page)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 1 {
			t.Fatalf("a page of %d users, limit 1", len(p.Items))
		}
		for _, u := range p.Items {
			ids = append(ids, u.ID)
		}
		if pages++; p.NextCursor == "" || pages > 10 {
			break
		}
		page.Cursor = p.NextCursor
	}
	if !slices.Equal(sorted(ids), sorted([]string{"admin", "alice", human.ID})) || !slices.IsSorted(ids) {
		t.Fatalf("paged users %v in %d pages", ids, pages)
	}

	// A read-only key of alice's, made by the administrator.
	readKey, err := admin.CreateUserAPIKey(ctx, "alice", client.APIKeyRequest{Name: "reader", Scopes: []string{client.ScopeRead}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(readKey.Key, "abx_"+readKey.ID+"_") || readKey.UserID != "alice" || !slices.Equal(readKey.Scopes, []string{"read"}) || readKey.ExpiresAt != nil {
		t.Fatalf("new key %+v", readKey.APIKey)
	}
	reader := client.New(env.URL, readKey.Key)
	if cu, err := reader.CurrentUser(ctx); err != nil || cu.User.ID != "alice" || cu.KeyID != readKey.ID || !slices.Equal(cu.Scopes, []string{"read"}) {
		t.Fatalf("alice's read key is %+v, %v", cu, err)
	}
	// Without its role's every scope, by default.
	rwKey, err := admin.CreateUserAPIKey(ctx, "alice", client.APIKeyRequest{Name: "rw", ExpiresInSeconds: 3600})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rwKey.Scopes, []string{"read", "write"}) || rwKey.ExpiresAt == nil || time.Until(*rwKey.ExpiresAt) > time.Hour {
		t.Fatalf("default key %+v", rwKey.APIKey)
	}
	writer := client.New(env.URL, rwKey.Key)

	// Alice's own keys: made, listed, revoked.
	own, err := writer.CreateAPIKey(ctx, client.APIKeyRequest{Name: "laptop"})
	if err != nil {
		t.Fatal(err)
	}
	if own.UserID != "alice" || own.Key == "" || !slices.Equal(own.Scopes, []string{"read", "write"}) {
		t.Fatalf("own key %+v", own.APIKey)
	}
	if cu, err := client.New(env.URL, own.Key).CurrentUser(ctx); err != nil || cu.KeyID != own.ID {
		t.Fatalf("own key is %+v, %v", cu, err)
	}
	keys, err := writer.ListAPIKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := keyIDs(keys); !slices.Equal(sorted(got), sorted([]string{readKey.ID, rwKey.ID, own.ID})) {
		t.Fatalf("alice's keys %v", got)
	}
	revoked, err := writer.RevokeAPIKey(ctx, own.ID)
	if err != nil {
		t.Fatal(err)
	}
	if revoked.ID != own.ID || revoked.RevokedAt == nil {
		t.Fatalf("revoked %+v", revoked)
	}
	if _, err := client.New(env.URL, own.Key).CurrentUser(ctx); client.CodeOf(err) != sandbox.CodeUnauthorized {
		t.Fatalf("a revoked key: %v", err)
	}

	// The administrator's view of alice's keys, and a revocation.
	keys, err = admin.ListUserAPIKeys(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if i := slices.IndexFunc(keys, func(k client.APIKey) bool { return k.ID == own.ID }); len(keys) != 3 || i < 0 || keys[i].RevokedAt == nil {
		t.Fatalf("admin's view of alice's keys %+v", keys)
	}
	if k, err := admin.RevokeUserAPIKey(ctx, "alice", readKey.ID); err != nil || k.RevokedAt == nil {
		t.Fatalf("revoke alice's key: %+v, %v", k, err)
	}
	if _, err := reader.CurrentUser(ctx); client.CodeOf(err) != sandbox.CodeUnauthorized {
		t.Fatalf("a key revoked by an administrator: %v", err)
	}

	// A role lowered narrows alice's keys; disabled, they stop working.
	if u, err := admin.UpdateUser(ctx, "alice", client.UserRequest{Role: ptr(client.RoleViewer)}); err != nil || u.Role != client.RoleViewer || u.Version <= alice.Version {
		t.Fatalf("set role: %+v, %v", u, err)
	}
	if cu, err := writer.CurrentUser(ctx); err != nil || !slices.Equal(cu.Scopes, []string{"read"}) {
		t.Fatalf("a viewer's read-write key: %+v, %v", cu, err)
	}
	if _, err := writer.CreateAPIKey(ctx, client.APIKeyRequest{Name: "x"}); client.CodeOf(err) != "FORBIDDEN" {
		t.Fatalf("a viewer makes a key: %v", err)
	}
	if u, err := admin.UpdateUser(ctx, "alice", client.UserRequest{Disabled: ptr(true)}); err != nil || !u.Disabled {
		t.Fatalf("disable: %+v, %v", u, err)
	}
	if _, err := writer.CurrentUser(ctx); client.CodeOf(err) != sandbox.CodeUnauthorized {
		t.Fatalf("a disabled user's key: %v", err)
	}
	if _, err := admin.UpdateUser(ctx, "alice", client.UserRequest{Disabled: ptr(false), Role: ptr(client.RoleMember)}); err != nil {
		t.Fatal(err)
	}
	if cu, err := writer.CurrentUser(ctx); err != nil || !slices.Equal(cu.Scopes, []string{"read", "write"}) {
		t.Fatalf("enabled again: %+v, %v", cu, err)
	}

	// An expired key.
	short, err := admin.CreateUserAPIKey(ctx, "alice", client.APIKeyRequest{Name: "short", ExpiresInSeconds: 1})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(*short.ExpiresAt) + 50*time.Millisecond)
	if _, err := client.New(env.URL, short.Key).CurrentUser(ctx); client.CodeOf(err) != "TOKEN_EXPIRED" {
		t.Fatalf("an expired key: %v", err)
	}

	tests := []struct {
		name string
		call func() error
		code sandbox.Code
	}{
		{"an unknown key", func() error { _, err := client.New(env.URL, "abx_nope_nope").CurrentUser(ctx); return err }, sandbox.CodeUnauthorized},
		{"no key", func() error { _, err := client.New(env.URL, "").ListAPIKeys(ctx); return err }, sandbox.CodeUnauthorized},
		{"a member lists users", func() error { _, err := writer.ListUsers(ctx, client.PageOptions{}); return err }, "FORBIDDEN"},
		{"a member reads the audit log", func() error { _, err := writer.ListAudit(ctx, client.AuditFilter{}); return err }, "FORBIDDEN"},
		{"a member's key above their role", func() error {
			_, err := writer.CreateAPIKey(ctx, client.APIKeyRequest{Name: "x", Scopes: []string{"admin"}})
			return err
		}, "FORBIDDEN"},
		{"an unknown scope", func() error {
			_, err := admin.CreateUserAPIKey(ctx, "alice", client.APIKeyRequest{Name: "x", Scopes: []string{"root"}})
			return err
		}, "INVALID_REQUEST"},
		{"a key without a name", func() error { _, err := admin.CreateAPIKey(ctx, client.APIKeyRequest{}); return err }, "INVALID_REQUEST"},
		{"a key of a missing user", func() error {
			_, err := admin.CreateUserAPIKey(ctx, "nobody", client.APIKeyRequest{Name: "x"})
			return err
		}, sandbox.CodeNotFound},
		{"the keys of a missing user", func() error { _, err := admin.ListUserAPIKeys(ctx, "nobody"); return err }, sandbox.CodeNotFound},
		{"another user's key revoked as theirs", func() error { _, err := admin.RevokeUserAPIKey(ctx, "admin", rwKey.ID); return err }, sandbox.CodeNotFound},
		{"another user's key revoked as one's own", func() error { _, err := admin.RevokeAPIKey(ctx, rwKey.ID); return err }, sandbox.CodeNotFound},
		{"a missing user", func() error { _, err := admin.GetUser(ctx, "nobody"); return err }, sandbox.CodeNotFound},
		{"an unknown role", func() error {
			_, err := admin.CreateUser(ctx, client.UserRequest{ID: "bob", Role: ptr("owner")})
			return err
		}, "INVALID_REQUEST"},
		{"no role", func() error { _, err := admin.CreateUser(ctx, client.UserRequest{ID: "bob"}); return err }, "INVALID_REQUEST"},
		{"a user again", func() error {
			_, err := admin.CreateUser(ctx, client.UserRequest{ID: "alice", Role: ptr("viewer")})
			return err
		}, sandbox.CodeAlreadyExists},
		{"an administrator demotes themselves", func() error {
			_, err := admin.UpdateUser(ctx, "admin", client.UserRequest{Role: ptr(client.RoleMember)})
			return err
		}, "FORBIDDEN"},
		{"an audit page over the limit", func() error { _, err := admin.ListAudit(ctx, client.AuditFilter{Limit: 500}); return err }, "INVALID_REQUEST"},
		{"an audit cursor not handed out", func() error { _, err := admin.ListAudit(ctx, client.AuditFilter{Cursor: "x"}); return err }, "INVALID_REQUEST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ae *client.APIError
			if client.CodeOf(err) != tt.code || !errors.As(err, &ae) || ae.Message == "" {
				t.Fatalf("err %v, want code %s", err, tt.code)
			}
		})
	}
	for _, call := range []func() error{
		func() error { _, err := admin.GetUser(ctx, ""); return err },
		func() error { _, err := admin.RevokeAPIKey(ctx, ""); return err },
		func() error { _, err := admin.RevokeUserAPIKey(ctx, "alice", ""); return err },
		func() error { _, err := admin.ListAudit(ctx, client.AuditFilter{Limit: -1}); return err },
	} {
		if err := call(); err == nil || client.CodeOf(err) != "" {
			t.Errorf("an argument missing: %v, want an error of the SDK's", err)
		}
	}

	// The audit log: what alice's user went through, newest first.
	userLog, err := admin.ListAudit(ctx, client.AuditFilter{Target: "user:alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(userLog.Items); !slices.Equal(got, []string{"user.enable", "user.set_role", "user.disable", "user.set_role", "user.create"}) ||
		userLog.NextCursor != "" || userLog.Items[0].ActorID != "admin" || userLog.Items[0].RequestID == "" {
		t.Fatalf("alice's audit log %v (next %q)", got, userLog.NextCursor)
	}
	// Key actions by prefix, two a page.
	var keyLog []client.AuditEntry
	f, pages := client.AuditFilter{Action: "api_key.", Actor: "admin", Limit: 2}, 0
	for {
		p, err := admin.ListAudit(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		if len(p.Items) > 2 {
			t.Fatalf("an audit page of %d entries, limit 2", len(p.Items))
		}
		keyLog = append(keyLog, p.Items...)
		if pages++; p.NextCursor == "" || pages > 10 {
			break
		}
		f.Cursor = p.NextCursor
	}
	// The administrator made three of alice's keys (reader, rw, short;
	// those refused are not logged) and revoked one; alice's own key's
	// entries are hers.
	if got := actions(keyLog); !slices.Equal(got, []string{"api_key.create", "api_key.revoke", "api_key.create", "api_key.create"}) || pages != 2 {
		t.Fatalf("admin's key actions %v in %d pages", got, pages)
	}
	if !slices.IsSortedFunc(keyLog, func(a, b client.AuditEntry) int { return int(b.Seq - a.Seq) }) {
		t.Fatalf("the audit log is not newest first: %+v", keyLog)
	}
	byAlice, err := admin.ListAudit(ctx, client.AuditFilter{Actor: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if got := actions(byAlice.Items); !slices.Equal(got, []string{"api_key.revoke", "api_key.create"}) ||
		byAlice.Items[0].Target != "api_key:"+own.ID {
		t.Fatalf("alice's actions %+v", byAlice.Items)
	}
	if later, err := admin.ListAudit(ctx, client.AuditFilter{Since: time.Now().Add(time.Hour)}); err != nil || len(later.Items) != 0 {
		t.Fatalf("the audit log since an hour from now: %+v, %v", later.Items, err)
	}
	if recent, err := admin.ListAudit(ctx, client.AuditFilter{Since: time.Now().Add(-time.Hour), Limit: 200}); err != nil || len(recent.Items) < 10 {
		t.Fatalf("the audit log of the last hour: %d entries, %v", len(recent.Items), err)
	}
}

func keyIDs(ks []client.APIKey) []string {
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = k.ID
	}
	return out
}

func actions(es []client.AuditEntry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Action
	}
	return out
}
