package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// newSession returns a complete session with the given id; each mod then
// changes it. Its JSON has spacing and key order a store must keep.
func newSession(id string, mods ...func(*store.Session)) *store.Session {
	s := &store.Session{
		ID:                   id,
		AgentID:              "agent",
		EngineKind:           "claude-code",
		State:                "READY",
		Title:                "Fix the build",
		CurrentTurnID:        "turn-1",
		PendingInteraction:   json.RawMessage(`{"kind":"approval",  "tool":"bash", "a":[1, 2]}`),
		Answer:               json.RawMessage(`{"interaction_id":"i-1",  "decision":"approve"}`),
		InterruptRequestedAt: ptr(at(1500 * time.Millisecond)),
		SandboxID:            "box-1",
		Runtime:              json.RawMessage(`{"command":"c-1","offset":1234}`),
		NativeKey:            "native-" + id,
		OwnerID:              "user-alice",
		OrgID:                "org-1",
		CreatedAt:            t0,
		UpdatedAt:            at(time.Second),
		LastActiveAt:         at(2 * time.Second),
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// checkSession fails t unless got is want as read back from a store: JSON
// byte for byte, nil exactly when want's is.
func checkSession(t *testing.T, got, want *store.Session) {
	t.Helper()
	sameJSON := func(g, w json.RawMessage) bool { return bytes.Equal(g, w) && (g == nil) == (w == nil) }
	if got.ID != want.ID || got.AgentID != want.AgentID || got.EngineKind != want.EngineKind ||
		got.State != want.State || got.Title != want.Title || got.CurrentTurnID != want.CurrentTurnID ||
		!sameJSON(got.PendingInteraction, want.PendingInteraction) || !sameJSON(got.Answer, want.Answer) ||
		!sameTimePtr(got.InterruptRequestedAt, want.InterruptRequestedAt) || got.SandboxID != want.SandboxID ||
		!sameJSON(got.Runtime, want.Runtime) || got.NativeKey != want.NativeKey ||
		got.OwnerID != want.OwnerID || got.OrgID != want.OrgID || got.Version != want.Version ||
		!sameTime(got.CreatedAt, want.CreatedAt) || !sameTime(got.UpdatedAt, want.UpdatedAt) ||
		!sameTime(got.LastActiveAt, want.LastActiveAt) {
		t.Errorf("session = %+v\nwant %+v", *got, *want)
	}
}

// mustCreateSession creates s or fails t.
func mustCreateSession(t *testing.T, st store.Store, s *store.Session) {
	t.Helper()
	if err := st.CreateSession(t.Context(), s); err != nil {
		t.Fatalf("create session %s: %v", s.ID, err)
	}
}

// mustGetSession gets session id or fails t.
func mustGetSession(t *testing.T, st store.Store, id string) *store.Session {
	t.Helper()
	s, err := st.GetSession(t.Context(), id)
	if err != nil {
		t.Fatalf("get session %s: %v", id, err)
	}
	return s
}

func testSessions(t *testing.T, st store.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		in   *store.Session
	}{
		{"full", newSession("full")},
		{"nothing pending", newSession("idle", func(s *store.Session) {
			s.PendingInteraction, s.Answer, s.InterruptRequestedAt, s.CurrentTurnID = nil, nil, nil, ""
		})},
		{"no runtime", newSession("fresh", func(s *store.Session) { s.Runtime, s.SandboxID, s.NativeKey = nil, "", "" })},
		{"other owner", newSession("other-owner", func(s *store.Session) { s.OwnerID, s.OrgID = "üser-✓", "org-2" })},
		{"large runtime", newSession("large", func(s *store.Session) {
			s.Runtime = json.RawMessage(fmt.Sprintf(`{"blob":%q}`, bytes.Repeat([]byte("x"), 1<<20)))
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mustCreateSession(t, st, tc.in)
			if tc.in.Version != 1 {
				t.Errorf("Version after create = %d, want 1", tc.in.Version)
			}
			checkSession(t, mustGetSession(t, st, tc.in.ID), tc.in)
		})
	}

	t.Run("zero times", func(t *testing.T) {
		before := time.Now()
		in := newSession("zero", func(s *store.Session) {
			s.CreatedAt, s.UpdatedAt, s.LastActiveAt = time.Time{}, time.Time{}, time.Time{}
		})
		mustCreateSession(t, st, in)
		for _, tm := range []time.Time{in.CreatedAt, in.UpdatedAt, in.LastActiveAt} {
			if tm.Before(before.Add(-time.Second)) || tm.After(time.Now().Add(time.Second)) {
				t.Errorf("written back time %v, want about now", tm)
			}
		}
		checkSession(t, mustGetSession(t, st, "zero"), in)
	})

	t.Run("stream", func(t *testing.T) { // created empty, with epoch 0
		checkStream(t, st, "full", nil)
		if l, err := st.GetLease(ctx, "full"); err != nil || l != (store.Lease{}) {
			t.Errorf("lease of a new session = %+v, %v; want none", l, err)
		}
		_, err := st.Append(ctx, "full", 1, []store.LogEntry{{Type: "x"}})
		checkErr(t, "fenced append to a new session's stream", err, store.ErrFenced)
		if l, err := st.AcquireLease(ctx, "full", "runner", time.Minute); err != nil || l.Epoch != 1 {
			t.Errorf("first lease = %+v, %v; want epoch 1", l, err)
		}
	})

	t.Run("conflict", func(t *testing.T) {
		checkErr(t, "second create", st.CreateSession(ctx, newSession("full", func(s *store.Session) { s.Title = "other" })), store.ErrConflict)
		checkSession(t, mustGetSession(t, st, "full"), newSession("full", func(s *store.Session) { s.Version = 1 }))
	})

	t.Run("not found", func(t *testing.T) {
		_, err := st.GetSession(ctx, "absent")
		checkErr(t, "get", err, store.ErrNotFound)
		checkErr(t, "update", st.UpdateSession(ctx, newSession("absent", func(s *store.Session) { s.Version = 1 })), store.ErrNotFound)
		checkErr(t, "delete", st.DeleteSession(ctx, "absent"), store.ErrNotFound)
	})
}

func testSessionUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateSession(t, st, newSession("s"))
	s := mustGetSession(t, st, "s")
	s.State, s.Title, s.CurrentTurnID = "BUSY", "Renamed", "turn-2"
	s.PendingInteraction, s.Runtime = nil, json.RawMessage(`{"command":"c-2"}`)
	s.Answer, s.InterruptRequestedAt = nil, nil
	s.SandboxID, s.NativeKey = "box-2", "native-2"
	s.UpdatedAt, s.LastActiveAt = at(time.Hour), at(time.Hour)
	s.OwnerID, s.OrgID = "mallory", "org-x" // kept as created
	if err := st.UpdateSession(ctx, s); err != nil {
		t.Fatalf("update: %v", err)
	}
	if s.Version != 2 {
		t.Errorf("Version after update = %d, want 2", s.Version)
	}
	if s.OwnerID != "user-alice" || s.OrgID != "org-1" {
		t.Errorf("written back owner = %q in %q, want the created user-alice in org-1", s.OwnerID, s.OrgID)
	}
	checkSession(t, mustGetSession(t, st, "s"), s)

	before := time.Now()
	s.UpdatedAt = time.Time{}
	s.Answer, s.InterruptRequestedAt = json.RawMessage(`{"answers": [["yes"]]}`), ptr(at(time.Hour))
	if err := st.UpdateSession(ctx, s); err != nil {
		t.Fatalf("update without UpdatedAt: %v", err)
	}
	if s.UpdatedAt.Before(before.Add(-time.Second)) || s.UpdatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("written back UpdatedAt = %v, want about now", s.UpdatedAt)
	}
	checkSession(t, mustGetSession(t, st, "s"), s)

	current := *s
	for _, v := range []int64{0, 1, 2, 4} {
		stale := newSession("s", func(x *store.Session) { x.Version, x.State = v, "TERMINATED" })
		checkErr(t, fmt.Sprintf("update with version %d", v), st.UpdateSession(ctx, stale), store.ErrConflict)
	}
	checkSession(t, mustGetSession(t, st, "s"), &current)
}

func testSessionList(t *testing.T, st store.Store) {
	fixture := []struct{ id, agent, state, owner string }{
		{"s3", "a1", "READY", "alice"}, {"s1", "a1", "BUSY", "bob"}, {"s5", "a2", "READY", "alice"},
		{"s2", "a2", "TERMINATED", "alice"}, {"s4", "a1", "READY", "bob"},
	}
	if counts, err := st.CountSessions(t.Context()); err != nil || len(counts) != 0 {
		t.Fatalf("counts of an empty store = %v, %v", counts, err)
	}
	for _, f := range fixture {
		mustCreateSession(t, st, newSession(f.id, func(s *store.Session) {
			s.AgentID, s.State, s.OwnerID = f.agent, f.state, f.owner
		}))
	}
	if counts, err := st.CountSessions(t.Context()); err != nil || !maps.Equal(counts, map[string]int{"READY": 3, "BUSY": 1, "TERMINATED": 1}) {
		t.Errorf("counts = %v, %v; want READY 3, BUSY 1, TERMINATED 1", counts, err)
	}
	tests := []struct {
		name string
		f    store.SessionFilter
		want []string
	}{
		{"all", store.SessionFilter{}, []string{"s1", "s2", "s3", "s4", "s5"}},
		{"agent", store.SessionFilter{AgentID: "a1"}, []string{"s1", "s3", "s4"}},
		{"unknown agent", store.SessionFilter{AgentID: "a9"}, nil},
		{"one state", store.SessionFilter{States: []string{"READY"}}, []string{"s3", "s4", "s5"}},
		{"two states", store.SessionFilter{States: []string{"BUSY", "TERMINATED"}}, []string{"s1", "s2"}},
		{"agent and state", store.SessionFilter{AgentID: "a1", States: []string{"READY"}}, []string{"s3", "s4"}},
		{"first page", store.SessionFilter{Limit: 2}, []string{"s1", "s2"}},
		{"next page", store.SessionFilter{AfterID: "s2", Limit: 2}, []string{"s3", "s4"}},
		{"filtered page", store.SessionFilter{AgentID: "a1", AfterID: "s1", Limit: 1}, []string{"s3"}},
		{"after the last", store.SessionFilter{AfterID: "s5"}, nil},
		{"owner", store.SessionFilter{OwnerID: "alice"}, []string{"s2", "s3", "s5"}},
		{"unknown owner", store.SessionFilter{OwnerID: "carol"}, nil},
		{"owner and agent", store.SessionFilter{OwnerID: "alice", AgentID: "a1"}, []string{"s3"}},
		{"owner and state", store.SessionFilter{OwnerID: "bob", States: []string{"READY"}}, []string{"s4"}},
		{"owner, every filter", store.SessionFilter{OwnerID: "bob", AgentID: "a1",
			States: []string{"BUSY", "READY"}, AfterID: "s1", Limit: 5}, []string{"s4"}},
		{"owner's first page", store.SessionFilter{OwnerID: "alice", Limit: 2}, []string{"s2", "s3"}},
		{"owner's next page", store.SessionFilter{OwnerID: "alice", AfterID: "s3", Limit: 2}, []string{"s5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ListSessions(t.Context(), tc.f)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var ids []string
			for _, s := range got {
				ids = append(ids, s.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("listed %v, want %v", ids, tc.want)
			}
		})
	}
}

// testDeleteSession deletes a session with inputs, log entries, a lease and
// native state: all go with it, and other sessions keep theirs.
func testDeleteSession(t *testing.T, st store.Store) {
	ctx := t.Context()
	for _, id := range []string{"gone", "kept"} {
		mustCreateSession(t, st, newSession(id))
		mustAccept(t, st, &store.Input{ID: id + "-in", SessionID: id, ClientMessageID: "m1", Content: "hi"})
		l, err := st.AcquireLease(ctx, id, "runner", time.Minute)
		if err != nil {
			t.Fatalf("acquire: %v", err)
		}
		if _, err := st.Append(ctx, id, l.Epoch, []store.LogEntry{{Type: "turn.started", Source: 7}}); err != nil {
			t.Fatalf("append: %v", err)
		}
		if _, err := st.AppendNativeState(ctx, id, l.Epoch, 0, []byte("line\n")); err != nil {
			t.Fatalf("append native state: %v", err)
		}
	}
	if err := st.DeleteSession(ctx, "gone"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err := st.GetSession(ctx, "gone")
	checkErr(t, "get deleted session", err, store.ErrNotFound)
	_, err = st.GetInput(ctx, "gone-in")
	checkErr(t, "get input of a deleted session", err, store.ErrNotFound)
	if ins, err := st.ListInputs(ctx, "gone"); err != nil || len(ins) != 0 {
		t.Errorf("inputs of a deleted session = %v, %v", ins, err)
	}
	checkStream(t, st, "gone", nil)
	if src, err := st.LastSource(ctx, "gone"); err != nil || src != 0 {
		t.Errorf("last source of a deleted session = %d, %v; want 0", src, err)
	}
	if l, err := st.GetLease(ctx, "gone"); err != nil || l != (store.Lease{}) {
		t.Errorf("lease of a deleted session = %+v, %v; want none", l, err)
	}
	if b, err := st.NativeState(ctx, "gone"); err != nil || b != nil {
		t.Errorf("native state of a deleted session = %q, %v; want nil", b, err)
	}
	checkErr(t, "delete again", st.DeleteSession(ctx, "gone"), store.ErrNotFound)
	_, _, err = st.AcceptInput(ctx, &store.Input{ID: "late", SessionID: "gone"}, store.LogEntry{Type: "input.accepted"})
	checkErr(t, "accept for a deleted session", err, store.ErrNotFound)

	if head, err := st.StreamHead(ctx, "kept"); err != nil || head != 2 {
		t.Errorf("head of the kept session = %d, %v; want 2", head, err)
	}
	if _, err := st.GetInput(ctx, "kept-in"); err != nil {
		t.Errorf("input of the kept session: %v", err)
	}
	if b, err := st.NativeState(ctx, "kept"); err != nil || string(b) != "line\n" {
		t.Errorf("native state of the kept session = %q, %v", b, err)
	}

	// The id can be used again, starting afresh.
	mustCreateSession(t, st, newSession("gone"))
	checkStream(t, st, "gone", nil)
	if in := mustAccept(t, st, &store.Input{ID: "gone-in", SessionID: "gone", ClientMessageID: "m1"}); in.Seq != 1 {
		t.Errorf("first input of the new session has seq %d, want 1", in.Seq)
	}
}
