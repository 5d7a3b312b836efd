package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// newAgent returns a complete agent with the given id; each mod then
// changes it.
func newAgent(id string, mods ...func(*store.Agent)) *store.Agent {
	a := &store.Agent{
		ID:             id,
		Name:           "Reviewer " + id,
		EngineKind:     "claude-code",
		RuntimeProfile: "default",
		Model:          "sonnet",
		Instructions:   "Review the change.\nBe brief.",
		PermissionMode: "ask",
		Tools:          []string{"read", "grep", "bash"},
		VaultIDs:       []string{"vault-1", "vault-2"},
		OwnerID:        "user-alice",
		OrgID:          "org-1",
		Visibility:     store.VisibilityShared,
		AllowedUserIDs: []string{"user-bob", "user-carol"},
		Admins:         []string{"user-dave"},
		CreatedAt:      t0,
		UpdatedAt:      at(time.Second),
	}
	for _, m := range mods {
		m(a)
	}
	return a
}

// checkAgent fails t unless got is want as read back from a store: the
// lists equal, with Tools, AllowedUserIDs and Admins nil exactly when
// want's are.
func checkAgent(t *testing.T, got, want *store.Agent) {
	t.Helper()
	sameList := func(g, w []string) bool { return slices.Equal(g, w) && (g == nil) == (w == nil) }
	if got.ID != want.ID || got.Name != want.Name || got.EngineKind != want.EngineKind ||
		got.RuntimeProfile != want.RuntimeProfile || got.Model != want.Model ||
		got.Instructions != want.Instructions || got.PermissionMode != want.PermissionMode ||
		!sameList(got.Tools, want.Tools) || !slices.Equal(got.VaultIDs, want.VaultIDs) ||
		got.OwnerID != want.OwnerID || got.OrgID != want.OrgID || got.Visibility != want.Visibility ||
		!sameList(got.AllowedUserIDs, want.AllowedUserIDs) || !sameList(got.Admins, want.Admins) ||
		got.Version != want.Version ||
		!sameTime(got.CreatedAt, want.CreatedAt) || !sameTime(got.UpdatedAt, want.UpdatedAt) {
		t.Errorf("agent = %+v (nil tools, allowed, admins: %v %v %v)\nwant %+v (nil: %v %v %v)",
			*got, got.Tools == nil, got.AllowedUserIDs == nil, got.Admins == nil,
			*want, want.Tools == nil, want.AllowedUserIDs == nil, want.Admins == nil)
	}
}

// mustGetAgent gets agent id or fails t.
func mustGetAgent(t *testing.T, st store.Store, id string) *store.Agent {
	t.Helper()
	a, err := st.GetAgent(t.Context(), id)
	if err != nil {
		t.Fatalf("get agent %s: %v", id, err)
	}
	return a
}

func testAgents(t *testing.T, st store.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		in   *store.Agent
	}{
		{"full", newAgent("full")},
		{"every tool", newAgent("every-tool", func(a *store.Agent) { a.Tools = nil })},
		{"no tool", newAgent("no-tool", func(a *store.Agent) { a.Tools = []string{} })},
		{"no vault", newAgent("no-vault", func(a *store.Agent) { a.VaultIDs = nil })},
		{"private", newAgent("private", func(a *store.Agent) {
			a.Visibility, a.AllowedUserIDs, a.Admins = store.VisibilityPrivate, nil, nil
		})},
		{"empty sharing lists", newAgent("empty-lists", func(a *store.Agent) {
			a.Visibility, a.AllowedUserIDs, a.Admins = store.VisibilityPublic, []string{}, []string{}
		})},
		{"other owner", newAgent("other-owner", func(a *store.Agent) { a.OwnerID, a.OrgID = "üser-✓", "org-2" })},
		{"empty strings", &store.Agent{ID: "empty", CreatedAt: t0, UpdatedAt: t0}},
		{"unicode", newAgent("ünï-✓", func(a *store.Agent) { a.Tools = []string{`q"uote`, "ü", ""} })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.CreateAgent(ctx, tc.in); err != nil {
				t.Fatalf("create: %v", err)
			}
			if tc.in.Version != 1 {
				t.Errorf("Version after create = %d, want 1", tc.in.Version)
			}
			checkAgent(t, mustGetAgent(t, st, tc.in.ID), tc.in)
		})
	}

	t.Run("zero times", func(t *testing.T) {
		before := time.Now()
		in := newAgent("zero-times", func(a *store.Agent) { a.CreatedAt, a.UpdatedAt = time.Time{}, time.Time{} })
		if err := st.CreateAgent(ctx, in); err != nil {
			t.Fatalf("create: %v", err)
		}
		if in.CreatedAt.Before(before.Add(-time.Second)) || in.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("written back CreatedAt = %v, want about now", in.CreatedAt)
		}
		checkTime(t, "written back UpdatedAt", in.UpdatedAt.UTC(), in.CreatedAt)
		checkAgent(t, mustGetAgent(t, st, in.ID), in)
	})

	t.Run("conflict", func(t *testing.T) {
		checkErr(t, "second create", st.CreateAgent(ctx, newAgent("full", func(a *store.Agent) { a.Model = "other" })), store.ErrConflict)
		checkAgent(t, mustGetAgent(t, st, "full"), newAgent("full", func(a *store.Agent) { a.Version = 1 }))
	})

	t.Run("not found", func(t *testing.T) {
		_, err := st.GetAgent(ctx, "absent")
		checkErr(t, "get", err, store.ErrNotFound)
		checkErr(t, "update", st.UpdateAgent(ctx, newAgent("absent", func(a *store.Agent) { a.Version = 1 })), store.ErrNotFound)
		checkErr(t, "delete", st.DeleteAgent(ctx, "absent"), store.ErrNotFound)
	})

	t.Run("delete", func(t *testing.T) {
		if err := st.DeleteAgent(ctx, "full"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		_, err := st.GetAgent(ctx, "full")
		checkErr(t, "get after delete", err, store.ErrNotFound)
		checkErr(t, "delete again", st.DeleteAgent(ctx, "full"), store.ErrNotFound)
	})
}

func testAgentUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	if err := st.CreateAgent(ctx, newAgent("a")); err != nil {
		t.Fatalf("create: %v", err)
	}
	a := mustGetAgent(t, st, "a")
	a.Name, a.Model, a.Instructions, a.PermissionMode = "Renamed", "opus", "", "auto"
	a.Tools, a.VaultIDs = nil, []string{"vault-3"}
	a.Visibility, a.AllowedUserIDs, a.Admins = store.VisibilityPublic, nil, []string{"user-erin", "user-bob"}
	a.OwnerID, a.OrgID = "mallory", "org-x" // kept as created
	a.UpdatedAt = at(time.Hour)
	if err := st.UpdateAgent(ctx, a); err != nil {
		t.Fatalf("update: %v", err)
	}
	if a.Version != 2 {
		t.Errorf("Version after update = %d, want 2", a.Version)
	}
	if a.OwnerID != "user-alice" || a.OrgID != "org-1" {
		t.Errorf("written back owner = %q in %q, want the created user-alice in org-1", a.OwnerID, a.OrgID)
	}
	checkAgent(t, mustGetAgent(t, st, "a"), a)

	before := time.Now()
	a.UpdatedAt = time.Time{}
	a.Tools = []string{}
	a.Visibility, a.AllowedUserIDs, a.Admins = store.VisibilityShared, []string{"user-bob"}, []string{}
	if err := st.UpdateAgent(ctx, a); err != nil {
		t.Fatalf("update without UpdatedAt: %v", err)
	}
	if a.UpdatedAt.Before(before.Add(-time.Second)) || a.UpdatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("written back UpdatedAt = %v, want about now", a.UpdatedAt)
	}
	checkAgent(t, mustGetAgent(t, st, "a"), a)

	current := *a
	for _, v := range []int64{0, 1, 2, 4, 100} {
		stale := newAgent("a", func(s *store.Agent) { s.Version, s.Model = v, "stale" })
		checkErr(t, fmt.Sprintf("update with version %d", v), st.UpdateAgent(ctx, stale), store.ErrConflict)
		if stale.Version != v {
			t.Errorf("a refused update changed Version from %d to %d", v, stale.Version)
		}
	}
	checkAgent(t, mustGetAgent(t, st, "a"), &current)
}

func testAgentList(t *testing.T, st store.Store) {
	ctx := t.Context()
	all := []string{"B", "_x", "a", "b", "c", "ü"} // byte-wise
	for _, id := range []string{"c", "a", "ü", "B", "b", "_x"} {
		if err := st.CreateAgent(ctx, newAgent(id)); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	tests := []struct {
		name    string
		afterID string
		limit   int
		want    []string
	}{
		{"all", "", 0, all},
		{"negative limit", "", -1, all},
		{"first page", "", 2, all[:2]},
		{"second page", "_x", 2, all[2:4]},
		{"last page", "b", 10, all[4:]},
		{"after a missing id", "ab", 2, []string{"b", "c"}},
		{"after the last", "ü", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ListAgents(ctx, tc.afterID, tc.limit)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var ids []string
			for _, a := range got {
				ids = append(ids, a.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("listed %v, want %v", ids, tc.want)
			}
		})
	}
	if got, err := st.ListAgents(ctx, "", 1); err != nil || len(got) != 1 {
		t.Fatalf("list one: %v, %v", got, err)
	} else {
		checkAgent(t, got[0], newAgent("B", func(a *store.Agent) { a.Version = 1 }))
	}
}
