package platform_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/engine/astrabox"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/store/streamlog"
	"github.com/astrabox/astrabox/vault"
)

// runtimes is a Runtimes that runs nothing.
type runtimes struct {
	mu       sync.Mutex
	released []string
}

func (*runtimes) Wake(string) {}
func (r *runtimes) Release(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = append(r.released, id)
	return nil
}

// front is a Catalog and a Sessions front over a SQLite store, with one
// runtime profile, "p", whose model endpoint is never called.
type front struct {
	cat  *platform.Catalog
	sess *platform.Sessions
	st   store.Store
}

func newFront(t *testing.T) *front {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := vault.New(key)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, DefaultBackend: "process",
		Profiles: map[string]lifecycle.Profile{"p": {Name: "p", Backend: "process",
			Model: &lifecycle.ModelEndpoint{BaseURL: "http://127.0.0.1:9/v1", Models: []string{"m"}}}},
		Vault: ring, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cat, err := platform.NewCatalog(platform.CatalogConfig{Store: st, Sandboxes: svc, Engines: engine.Registry{astrabox.Kind: astrabox.New()},
		Vault: ring, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := platform.NewSessions(platform.SessionsConfig{Store: st, Catalog: cat, Log: &streamlog.Log{Store: st, Notifier: streamlog.NewLocal()},
		Runtimes: &runtimes{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	return &front{cat: cat, sess: sess, st: st}
}

// The callers of the tests: an administrator, members (one of another
// organization) and a viewer.
var (
	root  = principalOf("root", identity.RoleAdmin, "default")
	alice = principalOf("alice", identity.RoleMember, "default")
	bob   = principalOf("bob", identity.RoleMember, "default")
	carol = principalOf("carol", identity.RoleMember, "default")
	vic   = principalOf("vic", identity.RoleViewer, "default")
	eve   = principalOf("eve", identity.RoleMember, "elsewhere")
)

func principalOf(id string, role identity.Role, org string) *identity.Principal {
	return &identity.Principal{UserID: id, Role: role, Scopes: identity.RoleScopes(role), OrgID: org}
}

// as is a context of p (nil: an internal caller).
func as(t *testing.T, p *identity.Principal) context.Context {
	if p == nil {
		return t.Context()
	}
	return identity.WithPrincipal(t.Context(), p)
}

// putAgent stores an Agent of alice's on profile p with the access given.
func (f *front) putAgent(t *testing.T, id, visibility string, allowed, admins, vaults []string) {
	t.Helper()
	a := &store.Agent{ID: id, Name: id, EngineKind: astrabox.Kind, RuntimeProfile: "p", Model: "m", PermissionMode: "auto",
		OwnerID: "alice", OrgID: "default", Visibility: visibility, AllowedUserIDs: allowed, Admins: admins, VaultIDs: vaults}
	if err := f.st.CreateAgent(context.Background(), a); err != nil {
		t.Fatal(err)
	}
}

// outcome names an answer: "ok", or its error code.
func outcome(err error) string {
	if err == nil {
		return "ok"
	}
	if c := sandbox.CodeOf(err); c != "" {
		return string(c)
	}
	return err.Error()
}

const (
	ok        = "ok"
	notFound  = string(platform.CodeAgentNotFound)
	noSession = string(platform.CodeSessionNotFound)
	forbidden = string(identity.CodeForbidden)
)

// TestAgentVisibility: who sees an Agent (GetAgent, AgentAccess, ListAgents)
// and who manages it (UpdateAgent, SetAgentAccess, DeleteAgent); one the
// caller may not see answers exactly as a missing one, one it sees but
// may not manage FORBIDDEN.
func TestAgentVisibility(t *testing.T) {
	f := newFront(t)
	f.putAgent(t, "agt_private", store.VisibilityPrivate, []string{"bob"}, nil, nil)
	f.putAgent(t, "agt_shared", store.VisibilityShared, []string{"bob"}, nil, nil)
	f.putAgent(t, "agt_public", store.VisibilityPublic, nil, nil, nil)
	f.putAgent(t, "agt_adminned", store.VisibilityPrivate, nil, []string{"carol"}, nil)
	f.putAgent(t, "agt_legacy", "", nil, nil, nil) // a record from before visibilities: private

	callers := []struct {
		name string
		p    *identity.Principal
	}{{"internal", nil}, {"root", root}, {"alice", alice}, {"bob", bob}, {"carol", carol}, {"vic", vic}, {"eve", eve}}
	// sees[agent] are the callers that see it; manages[agent] those that
	// manage it.
	sees := map[string][]string{
		"agt_private":  {"internal", "root", "alice"},
		"agt_shared":   {"internal", "root", "alice", "bob"},
		"agt_public":   {"internal", "root", "alice", "bob", "carol", "vic"},
		"agt_adminned": {"internal", "root", "alice", "carol"},
		"agt_legacy":   {"internal", "root", "alice"},
	}
	manages := map[string][]string{
		"agt_private":  {"internal", "root", "alice"},
		"agt_shared":   {"internal", "root", "alice"},
		"agt_public":   {"internal", "root", "alice"},
		"agt_adminned": {"internal", "root", "alice", "carol"},
		"agt_legacy":   {"internal", "root", "alice"},
	}
	agents := slices.Sorted(func(yield func(string) bool) {
		for a := range sees {
			if !yield(a) {
				return
			}
		}
	})
	for _, c := range callers {
		ctx := as(t, c.p)
		var listed []string
		for _, id := range agents {
			want := ok
			if !slices.Contains(sees[id], c.name) {
				want = notFound
			}
			_, err := f.cat.GetAgent(ctx, id)
			if got := outcome(err); got != want {
				t.Errorf("%s gets %s: %s, want %s", c.name, id, got, want)
			}
			if err != nil {
				// Not seen: the very answer to an id that does not exist.
				_, missing := f.cat.GetAgent(ctx, "agt_missing")
				if sandbox.MessageOf(err) != fmt.Sprintf("agent %q not found", id) || sandbox.CodeOf(missing) != sandbox.CodeOf(err) {
					t.Errorf("%s gets %s: %v, not as for a missing agent (%v)", c.name, id, err, missing)
				}
			} else {
				listed = append(listed, id)
			}
			if _, err := f.cat.AgentAccess(ctx, id); outcome(err) != want {
				t.Errorf("%s reads the access of %s: %v, want %s", c.name, id, err, want)
			}
		}
		page, next, err := f.cat.ListAgents(ctx, "", 200)
		var ids []string
		for _, a := range page {
			ids = append(ids, a.ID)
		}
		if err != nil || next != "" || !slices.Equal(ids, listed) {
			t.Errorf("%s lists %v (next %q, %v), want %v", c.name, ids, next, err, listed)
		}
	}

	// Managing: 404 for an Agent not seen, FORBIDDEN for one seen but not
	// managed (a viewer lacks the write permission besides).
	for _, id := range agents {
		for _, c := range callers {
			want := ok
			switch {
			case !slices.Contains(sees[id], c.name):
				want = notFound
			case !slices.Contains(manages[id], c.name) || c.name == "vic":
				want = forbidden
			}
			ctx := as(t, c.p)
			_, err := f.cat.UpdateAgent(ctx, id, wire.AgentRequest{Name: "renamed by " + c.name, RuntimeProfile: "p"})
			if got := outcome(err); got != want {
				t.Errorf("%s updates %s: %v, want %s", c.name, id, err, want)
			}
			before, _ := f.cat.AgentAccess(context.Background(), id)
			_, err = f.cat.SetAgentAccess(ctx, id, before)
			if got := outcome(err); got != want {
				t.Errorf("%s sets the access of %s: %v, want %s", c.name, id, err, want)
			}
			if want == ok {
				continue // deleting is tried below, by those who may not
			}
			if err := f.cat.DeleteAgent(ctx, id); outcome(err) != want {
				t.Errorf("%s deletes %s: %v, want %s", c.name, id, err, want)
			}
		}
	}
	// An update keeps the owner and the access.
	a, err := f.cat.GetAgent(context.Background(), "agt_adminned")
	if err != nil || a.OwnerID != "alice" || a.Visibility != store.VisibilityPrivate || !slices.Equal(a.Admins, []string{"carol"}) ||
		a.AllowedUserIDs == nil {
		t.Fatalf("agt_adminned after updates: %+v %v", a, err)
	}
	if err := f.cat.DeleteAgent(as(t, carol), "agt_adminned"); err != nil {
		t.Fatalf("an admin of the agent deletes it: %v", err)
	}
}

// TestAgentAccessChanges: sharing and publishing an Agent shows it to
// whom it names; an agent admin may manage it; bad access is refused.
func TestAgentAccessChanges(t *testing.T) {
	f := newFront(t)
	a, err := f.cat.CreateAgent(as(t, alice), wire.AgentRequest{Name: "mine", RuntimeProfile: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if a.OwnerID != "alice" || a.Visibility != wire.VisibilityPrivate || a.AllowedUserIDs == nil || a.Admins == nil {
		t.Fatalf("created %+v: want alice's, private, with empty lists", a)
	}
	if _, err := f.cat.GetAgent(as(t, bob), a.ID); outcome(err) != notFound {
		t.Fatalf("bob gets alice's private agent: %v", err)
	}
	acc, err := f.cat.SetAgentAccess(as(t, alice), a.ID, wire.AgentAccess{Visibility: "shared", AllowedUserIDs: []string{" bob ", "bob"}})
	if err != nil || !slices.Equal(acc.AllowedUserIDs, []string{"bob"}) || acc.Admins == nil {
		t.Fatalf("share with bob: %+v %v", acc, err)
	}
	if _, err := f.cat.GetAgent(as(t, bob), a.ID); err != nil {
		t.Fatalf("bob gets the agent shared with him: %v", err)
	}
	if _, err := f.cat.SetAgentAccess(as(t, bob), a.ID, wire.AgentAccess{Visibility: "public"}); outcome(err) != forbidden {
		t.Fatalf("bob publishes it: %v, want %s", err, forbidden)
	}
	if _, err := f.cat.SetAgentAccess(as(t, alice), a.ID, wire.AgentAccess{Visibility: "private", Admins: []string{"bob"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cat.SetAgentAccess(as(t, bob), a.ID, wire.AgentAccess{Visibility: "public"}); err != nil {
		t.Fatalf("bob, an admin of the agent, publishes it: %v", err)
	}
	if _, err := f.cat.GetAgent(as(t, carol), a.ID); err != nil {
		t.Fatalf("carol gets the public agent: %v", err)
	}
	for _, bad := range []wire.AgentAccess{{Visibility: "everyone"}, {}, {Visibility: "shared", AllowedUserIDs: []string{" "}}} {
		if _, err := f.cat.SetAgentAccess(as(t, alice), a.ID, bad); outcome(err) != string(platform.CodeInvalid) {
			t.Errorf("access %+v: %v, want %s", bad, err, platform.CodeInvalid)
		}
	}
	if _, err := f.cat.SetAgentAccess(as(t, root), a.ID, wire.AgentAccess{Visibility: "private"}); err != nil {
		t.Fatalf("an administrator changes the access: %v", err)
	}
	if _, err := f.cat.GetAgent(as(t, bob), a.ID); outcome(err) != notFound {
		t.Fatalf("bob gets the agent once no longer its admin: %v", err)
	}
}

// TestAgentVaultsAreAdministrators': only an administrator gives an Agent
// vaults or changes them; its owner may update it keeping them.
func TestAgentVaultsAreAdministrators(t *testing.T) {
	f := newFront(t)
	v, err := f.cat.CreateVault(as(t, root), wire.VaultRequest{Name: "v"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.cat.CreateVault(as(t, alice), wire.VaultRequest{Name: "w"}); outcome(err) != forbidden {
		t.Fatalf("a member creates a vault: %v", err)
	}
	if _, _, err := f.cat.ListVaults(as(t, alice), "", 0); outcome(err) != forbidden {
		t.Fatalf("a member lists vaults: %v", err)
	}
	_, err = f.cat.CreateAgent(as(t, alice), wire.AgentRequest{Name: "a", RuntimeProfile: "p", VaultIDs: []string{v.ID}})
	if outcome(err) != forbidden || !strings.Contains(sandbox.MessageOf(err), "admin") {
		t.Fatalf("a member creates an agent with a vault: %v, want %s naming admin", err, forbidden)
	}
	// Probing vault ids answers the same: nothing says which exist.
	if _, err := f.cat.CreateAgent(as(t, alice), wire.AgentRequest{Name: "a", RuntimeProfile: "p", VaultIDs: []string{"vlt_nope"}}); outcome(err) != forbidden {
		t.Fatalf("a member names a missing vault: %v, want %s", err, forbidden)
	}
	if _, err := f.cat.CreateAgent(as(t, root), wire.AgentRequest{Name: "a", RuntimeProfile: "p", VaultIDs: []string{"vlt_nope"}}); outcome(err) != string(platform.CodeVaultNotFound) {
		t.Fatalf("an administrator names a missing vault: %v", err)
	}
	f.putAgent(t, "agt_vaulted", store.VisibilityPrivate, nil, nil, []string{v.ID})
	for _, tc := range []struct {
		who    *identity.Principal
		vaults []string
		want   string
	}{
		{alice, []string{v.ID}, ok},
		{alice, nil, forbidden},
		{root, nil, ok},
		{alice, []string{v.ID}, forbidden},
		{root, []string{v.ID}, ok},
	} {
		_, err := f.cat.UpdateAgent(as(t, tc.who), "agt_vaulted", wire.AgentRequest{Name: "x", RuntimeProfile: "p", VaultIDs: tc.vaults})
		if got := outcome(err); got != tc.want {
			t.Errorf("%s updates with vaults %v: %v, want %s", tc.who.UserID, tc.vaults, err, tc.want)
		}
	}
	if _, err := f.cat.PutRuntimeProfile(as(t, alice), lifecycle.Profile{Name: "q", Backend: "process"}); outcome(err) != forbidden {
		t.Fatalf("a member changes a runtime profile: %v", err)
	}
	if _, err := f.cat.RuntimeProfile(as(t, alice), "p"); err != nil {
		t.Fatalf("a member reads a runtime profile: %v", err)
	}
}

// TestVaultedAgentAccess: the owner and the admins of an Agent that holds
// credential vaults may narrow its access but not widen it (more users
// would use the vaults' credentials); an administrator may.
func TestVaultedAgentAccess(t *testing.T) {
	f := newFront(t)
	v, err := f.cat.CreateVault(as(t, root), wire.VaultRequest{Name: "v"})
	if err != nil {
		t.Fatal(err)
	}
	type access = wire.AgentAccess
	for _, tc := range []struct {
		name   string
		vis    string   // the Agent's visibility before
		users  []string // its allowed users before
		who    *identity.Principal
		req    access
		vaults bool // the Agent holds a vault
		want   string
	}{
		{"owner publishes", store.VisibilityPrivate, nil, alice, access{Visibility: "public"}, true, forbidden},
		{"owner shares", store.VisibilityPrivate, nil, alice, access{Visibility: "shared", AllowedUserIDs: []string{"bob"}}, true, forbidden},
		{"owner shares with one more", store.VisibilityShared, []string{"bob"}, alice, access{Visibility: "shared", AllowedUserIDs: []string{"bob", "carol"}}, true, forbidden},
		{"owner publishes a shared one", store.VisibilityShared, []string{"bob"}, alice, access{Visibility: "public", AllowedUserIDs: []string{"bob"}}, true, forbidden},
		{"owner adds an admin", store.VisibilityPrivate, nil, alice, access{Visibility: "private", Admins: []string{"bob"}}, true, forbidden},
		{"agent admin publishes", store.VisibilityPrivate, nil, carol, access{Visibility: "public", Admins: []string{"carol"}}, true, forbidden},
		{"owner keeps", store.VisibilityShared, []string{"bob"}, alice, access{Visibility: "shared", AllowedUserIDs: []string{"bob"}, Admins: []string{"carol"}}, true, ok},
		{"owner narrows to private", store.VisibilityShared, []string{"bob"}, alice, access{Visibility: "private"}, true, ok},
		{"owner drops a user", store.VisibilityShared, []string{"bob", "carol"}, alice, access{Visibility: "shared", AllowedUserIDs: []string{"bob"}}, true, ok},
		{"administrator publishes", store.VisibilityPrivate, nil, root, access{Visibility: "public"}, true, ok},
		{"owner publishes without vaults", store.VisibilityPrivate, nil, alice, access{Visibility: "public"}, false, ok},
	} {
		id := "agt_" + strings.ReplaceAll(tc.name, " ", "_")
		var vaults []string
		if tc.vaults {
			vaults = []string{v.ID}
		}
		f.putAgent(t, id, tc.vis, tc.users, []string{"carol"}, vaults)
		_, err := f.cat.SetAgentAccess(as(t, tc.who), id, tc.req)
		if got := outcome(err); got != tc.want {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.want)
		}
		if tc.want == forbidden && !strings.Contains(sandbox.MessageOf(err), string(identity.ScopeAdmin)) {
			t.Errorf("%s: %v does not name the %s permission", tc.name, err, identity.ScopeAdmin)
		}
		after, _ := f.cat.AgentAccess(context.Background(), id)
		if tc.want == forbidden && (after.Visibility != tc.vis || !slices.Equal(after.AllowedUserIDs, nonNilList(tc.users))) {
			t.Errorf("%s: refused, yet the access is now %+v", tc.name, after)
		}
	}
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// TestListAgentsPages: a member's pages hold only what it sees, full but
// for the last, however many Agents it does not see lie between.
func TestListAgentsPages(t *testing.T) {
	f := newFront(t)
	var want []string
	for i := range 450 {
		id := fmt.Sprintf("agt_%03d", i)
		vis := store.VisibilityPrivate
		if i%7 == 3 || i > 440 {
			vis = store.VisibilityPublic
			want = append(want, id)
		}
		f.putAgent(t, id, vis, nil, nil, nil)
	}
	for _, limit := range []int{1, 5, 50, 200} {
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			page, next, err := f.cat.ListAgents(as(t, bob), cursor, limit)
			if err != nil || pages > len(want) {
				t.Fatalf("limit %d, page %d: %v", limit, pages, err)
			}
			if next != "" && len(page) != limit {
				t.Fatalf("limit %d: a page of %d before the end", limit, len(page))
			}
			for _, a := range page {
				got = append(got, a.ID)
			}
			if cursor = next; next == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: bob pages through %d agents %v, want %d", limit, len(got), got, len(want))
		}
	}
}
