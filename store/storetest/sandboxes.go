package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// blob returns n bytes of every value, in a pattern.
func blob(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

func testSandboxRoundTrip(t *testing.T, st store.Store) {
	tests := []struct {
		name string
		in   *store.Sandbox
	}{
		{"full", newSandbox("full")},
		{"minimal", &store.Sandbox{ID: "minimal", Backend: "native", State: sandbox.StatePending,
			CreatedAt: t0, UpdatedAt: t0, LastActiveAt: t0}},
		{"nil expiry", newSandbox("nil-expiry", func(s *store.Sandbox) { s.ExpiresAt = nil })},
		{"nil metadata", newSandbox("nil-metadata", func(s *store.Sandbox) { s.Metadata = nil })},
		{"empty metadata", newSandbox("empty-metadata", func(s *store.Sandbox) { s.Metadata = map[string]string{} })},
		{"awkward metadata", newSandbox("awkward-metadata", func(s *store.Sandbox) {
			s.Metadata = map[string]string{
				"a.b": "1", `q"uote`: `v'al"ue`, "ünï/çødé": "✓", "": "empty key",
				"empty value": "", "$.path[0]": "json path", "%_": "like wildcards",
			}
		})},
		{"empty entrypoint", newSandbox("empty-entrypoint", func(s *store.Sandbox) { s.Entrypoint = nil })},
		{"large blobs", newSandbox("large-blobs", func(s *store.Sandbox) {
			s.Spec = blob(4 << 20)
			s.ProviderState = blob(1 << 20)
		})},
		{"zero last active", newSandbox("zero-last-active", func(s *store.Sandbox) { s.LastActiveAt = time.Time{} })},
		{"unicode id", newSandbox("box-ünï-✓", func(s *store.Sandbox) { s.Reason = "multi\nline\treason" })},
		{"other owner", newSandbox("other-owner", func(s *store.Sandbox) { s.OwnerID, s.OrgID = "üser-✓", "org-2" })},
		{"no owner", newSandbox("no-owner", func(s *store.Sandbox) { s.OwnerID, s.OrgID = "", "" })},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			mustCreate(t, st, in)
			if in.Version != 1 {
				t.Errorf("Version after create = %d, want 1", in.Version)
			}
			want := *in
			got := mustGet(t, st, in.ID)
			checkSandbox(t, got, &want)
			if got.LastActiveAt.IsZero() != want.LastActiveAt.IsZero() {
				t.Errorf("LastActiveAt = %v, want %v", got.LastActiveAt, want.LastActiveAt)
			}
		})
	}
	t.Run("zero created", func(t *testing.T) {
		before := time.Now()
		in := newSandbox("zero-created", func(s *store.Sandbox) { s.CreatedAt, s.UpdatedAt = time.Time{}, time.Time{} })
		mustCreate(t, st, in)
		got := mustGet(t, st, in.ID)
		if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("CreatedAt = %v, want about now", got.CreatedAt)
		}
		checkTime(t, "UpdatedAt", got.UpdatedAt, got.CreatedAt)
		checkTime(t, "written back CreatedAt", in.CreatedAt, got.CreatedAt)
	})
	t.Run("copy", func(t *testing.T) {
		got := mustGet(t, st, "full")
		got.Metadata["owner"] = "mallory"
		got.Spec[0] = 'X'
		if again := mustGet(t, st, "full"); again.Metadata["owner"] != "alice" || again.Spec[0] != '{' {
			t.Error("changing a returned record changed the store")
		}
	})
}

func testCreateConflict(t *testing.T, st store.Store) {
	first := newSandbox("dup")
	mustCreate(t, st, first)
	second := newSandbox("dup", func(s *store.Sandbox) { s.Backend, s.Image = "docker", "alpine" })
	checkErr(t, "second create", st.CreateSandbox(t.Context(), second), store.ErrConflict)
	checkSandbox(t, mustGet(t, st, "dup"), newSandbox("dup", func(s *store.Sandbox) { s.Version = 1 }))
}

func testNotFound(t *testing.T, st store.Store) {
	mustCreate(t, st, newSandbox("present"))
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
	}{
		{"get", func() error { _, err := st.GetSandbox(ctx, "absent"); return err }},
		{"update", func() error {
			return st.UpdateSandbox(ctx, newSandbox("absent", func(s *store.Sandbox) { s.Version = 1 }))
		}},
		{"delete", func() error { return st.DeleteSandbox(ctx, "absent") }},
		{"get profile", func() error { _, err := st.GetProfile(ctx, "absent"); return err }},
		{"delete profile", func() error { return st.DeleteProfile(ctx, "absent") }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { checkErr(t, tc.name, tc.call(), store.ErrNotFound) })
	}
	events, err := st.Events(ctx, "absent", 0)
	if err != nil || len(events) != 0 {
		t.Errorf("events of an unknown sandbox = %v, %v; want none, nil", events, err)
	}
}

func testDeleteAndRecreate(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSandbox("box", func(s *store.Sandbox) { s.Metadata = map[string]string{"gen": "1"} }))
	if err := st.DeleteSandbox(ctx, "box"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := st.GetSandbox(ctx, "box")
	checkErr(t, "get after delete", err, store.ErrNotFound)
	checkErr(t, "second delete", st.DeleteSandbox(ctx, "box"), store.ErrNotFound)

	again := newSandbox("box", func(s *store.Sandbox) { s.Metadata = map[string]string{"gen": "2"} })
	mustCreate(t, st, again)
	checkSandbox(t, mustGet(t, st, "box"), again)
	for gen, want := range map[string]int{"1": 0, "2": 1} {
		_, total, err := st.ListSandboxes(ctx, store.ListFilter{Metadata: map[string]string{"gen": gen}})
		if err != nil || total != want {
			t.Errorf("list gen=%s: total %d, %v; want %d", gen, total, err, want)
		}
	}
}

func testUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSandbox("box"))
	s := mustGet(t, st, "box")
	s.Backend = "docker"
	s.Profile = "gpu"
	s.State = sandbox.StatePaused
	s.Reason = "paused by user"
	s.Image = "alpine:3"
	s.Spec = []byte(`{"image":"alpine:3"}`)
	s.Metadata = map[string]string{"owner": "bob"} // "team" removed
	s.Entrypoint = []string{"/init"}
	s.UpdatedAt = at(time.Minute)
	s.ExpiresAt = nil
	s.IdleTimeout = 0
	s.LastActiveAt = at(time.Minute)
	s.ProviderState = nil
	s.OwnerID, s.OrgID = "user-bob", "org-2" // written as given, unlike an agent's
	if err := st.UpdateSandbox(ctx, s); err != nil {
		t.Fatalf("update: %v", err)
	}
	if s.Version != 2 {
		t.Errorf("Version after update = %d, want 2", s.Version)
	}
	checkSandbox(t, mustGet(t, st, "box"), s)

	filters := []struct {
		name  string
		f     store.ListFilter
		total int
	}{
		{"removed pair", store.ListFilter{Metadata: map[string]string{"team": "core"}}, 0},
		{"old value", store.ListFilter{Metadata: map[string]string{"owner": "alice"}}, 0},
		{"new value", store.ListFilter{Metadata: map[string]string{"owner": "bob"}}, 1},
		{"new backend", store.ListFilter{Backend: "docker"}, 1},
		{"no expiry", store.ListFilter{ExpiresBefore: ptr(at(1000 * time.Hour))}, 0},
		{"old owner", store.ListFilter{OwnerID: "user-alice"}, 0},
		{"new owner", store.ListFilter{OwnerID: "user-bob"}, 1},
	}
	for _, tc := range filters {
		if _, total, err := st.ListSandboxes(ctx, tc.f); err != nil || total != tc.total {
			t.Errorf("list %s after update: total %d, %v; want %d", tc.name, total, err, tc.total)
		}
	}

	s.ExpiresAt = ptr(at(2 * time.Hour))
	if err := st.UpdateSandbox(ctx, s); err != nil {
		t.Fatalf("second update: %v", err)
	}
	checkSandbox(t, mustGet(t, st, "box"), s)
	if s.Version != 3 {
		t.Errorf("Version after second update = %d, want 3", s.Version)
	}
}

func testUpdateStaleVersion(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSandbox("box"))
	current := mustGet(t, st, "box")
	if err := st.UpdateSandbox(ctx, current); err != nil { // now version 2
		t.Fatalf("update: %v", err)
	}
	for _, v := range []int64{0, 1, 3, 100} {
		stale := newSandbox("box", func(s *store.Sandbox) { s.Version, s.Image = v, "changed" })
		checkErr(t, fmt.Sprintf("update with version %d", v), st.UpdateSandbox(ctx, stale), store.ErrConflict)
		if stale.Version != v {
			t.Errorf("a refused update changed Version from %d to %d", v, stale.Version)
		}
	}
	checkSandbox(t, mustGet(t, st, "box"), current)
}

func testUpdateRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSandbox("box"))

	// Two updaters read the same version; the first to write wins.
	a, b := mustGet(t, st, "box"), mustGet(t, st, "box")
	a.Reason, b.Reason = "a", "b"
	if err := st.UpdateSandbox(ctx, a); err != nil {
		t.Fatalf("first update: %v", err)
	}
	checkErr(t, "second update", st.UpdateSandbox(ctx, b), store.ErrConflict)

	// Many at once from one version: exactly one wins.
	const n = 12
	read := mustGet(t, st, "box")
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		won       []string
		otherErrs []error
	)
	for i := range n {
		wg.Go(func() {
			s := *read
			s.Reason = string(rune('a' + i))
			err := st.UpdateSandbox(ctx, &s)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, s.Reason)
			case !errors.Is(err, store.ErrConflict):
				otherErrs = append(otherErrs, err)
			}
		})
	}
	wg.Wait()
	if len(otherErrs) > 0 {
		t.Fatalf("concurrent updates failed: %v", otherErrs)
	}
	if len(won) != 1 {
		t.Fatalf("%d concurrent updates from one version succeeded, want 1", len(won))
	}
	got := mustGet(t, st, "box")
	if got.Reason != won[0] || got.Version != read.Version+1 {
		t.Errorf("record after race: reason %q version %d, want %q version %d",
			got.Reason, got.Version, won[0], read.Version+1)
	}
	if !bytes.Equal(got.Spec, read.Spec) {
		t.Error("race changed the Spec")
	}
}
