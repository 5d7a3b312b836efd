package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// listFixture creates sandboxes, in an order unlike the listing order, that
// the list tests select from. Listed by CreatedAt then ID (byte-wise) they
// are c1 Z9 a1 a2 b1 b2 c2. Their owners are alice (a1 a2 c2), bob (b1 b2)
// and admin (c1 Z9).
func listFixture(t *testing.T, st store.Store) {
	t.Helper()
	type row struct {
		id       string
		created  time.Duration
		backend  string
		state    sandbox.State
		metadata map[string]string
		expires  time.Duration // 0: never
	}
	rows := []row{
		{"b2", 2 * time.Second, "docker", sandbox.StateTerminated, map[string]string{"owner": "bob"}, 10 * time.Minute},
		{"a2", 0, "native", sandbox.StatePaused, map[string]string{"owner": "alice"}, 0},
		{"c2", 3 * time.Second, "kube", sandbox.StatePending, map[string]string{"owner": "alice", "team": "edge"}, 2 * time.Hour},
		{"Z9", 0, "native", sandbox.StateStopping, nil, 0},
		{"a1", 0, "native", sandbox.StateRunning, map[string]string{"owner": "alice", "team": "core"}, time.Hour},
		{"c1", -time.Second, "native", sandbox.StateFailed, nil, 5 * time.Minute},
		{"b1", time.Second, "docker", sandbox.StateRunning, map[string]string{"owner": "bob", "team": "core"}, 30 * time.Minute},
	}
	for _, r := range rows {
		mustCreate(t, st, newSandbox(r.id, func(s *store.Sandbox) {
			s.CreatedAt = at(r.created)
			s.Backend = r.backend
			s.State = r.state
			s.Metadata = r.metadata
			s.ExpiresAt = nil
			s.OwnerID, s.OrgID = "admin", "default"
			if o := r.metadata["owner"]; o != "" {
				s.OwnerID, s.OrgID = o, "org-"+o
			}
			s.Instance = r.backend + ":one"
			if r.id == "b2" {
				s.Instance = "docker:two"
			}
			if r.expires != 0 {
				s.ExpiresAt = ptr(at(r.expires))
			}
		}))
	}
}

func testList(t *testing.T, st store.Store) {
	listFixture(t, st)
	running, paused, failed := sandbox.StateRunning, sandbox.StatePaused, sandbox.StateFailed
	tests := []struct {
		name string
		f    store.ListFilter
		want []string
	}{
		{"all", store.ListFilter{}, []string{"c1", "Z9", "a1", "a2", "b1", "b2", "c2"}},
		{"empty states", store.ListFilter{States: []sandbox.State{}}, []string{"c1", "Z9", "a1", "a2", "b1", "b2", "c2"}},
		{"one state", store.ListFilter{States: []sandbox.State{running}}, []string{"a1", "b1"}},
		{"two states", store.ListFilter{States: []sandbox.State{paused, running}}, []string{"a1", "a2", "b1"}},
		{"backend", store.ListFilter{Backend: "docker"}, []string{"b1", "b2"}},
		{"unknown backend", store.ListFilter{Backend: "nope"}, nil},
		{"instance", store.ListFilter{Backend: "docker", Instance: "docker:one"}, []string{"b1"}},
		{"other instance", store.ListFilter{Instance: "docker:two"}, []string{"b2"}},
		{"unknown instance", store.ListFilter{Instance: "native:elsewhere"}, nil},
		{"one pair", store.ListFilter{Metadata: map[string]string{"owner": "alice"}}, []string{"a1", "a2", "c2"}},
		{"two pairs", store.ListFilter{Metadata: map[string]string{"owner": "alice", "team": "core"}}, []string{"a1"}},
		{"two pairs other", store.ListFilter{Metadata: map[string]string{"team": "core", "owner": "bob"}}, []string{"b1"}},
		{"pair value differs", store.ListFilter{Metadata: map[string]string{"owner": "carol"}}, nil},
		{"absent key is not empty value", store.ListFilter{Metadata: map[string]string{"team": ""}}, nil},
		{"empty metadata filter", store.ListFilter{Metadata: map[string]string{}}, []string{"c1", "Z9", "a1", "a2", "b1", "b2", "c2"}},
		{"expires before, strict", store.ListFilter{ExpiresBefore: ptr(at(30 * time.Minute))}, []string{"c1", "b2"}},
		{"expires before, just after", store.ListFilter{ExpiresBefore: ptr(at(30*time.Minute + time.Millisecond))}, []string{"c1", "b1", "b2"}},
		{"expires before, far", store.ListFilter{ExpiresBefore: ptr(at(1000 * time.Hour))}, []string{"c1", "a1", "b1", "b2", "c2"}},
		{"expires before, in UTC", store.ListFilter{ExpiresBefore: ptr(at(6 * time.Minute).UTC())}, []string{"c1"}},
		{"backend and states and expiry", store.ListFilter{
			Backend: "native", States: []sandbox.State{running, failed},
			ExpiresBefore: ptr(at(time.Hour + time.Millisecond)),
		}, []string{"c1", "a1"}},
		{"backend and metadata", store.ListFilter{Backend: "native", Metadata: map[string]string{"owner": "alice"}}, []string{"a1", "a2"}},
		{"owner", store.ListFilter{OwnerID: "alice"}, []string{"a1", "a2", "c2"}},
		{"other owner", store.ListFilter{OwnerID: "admin"}, []string{"c1", "Z9"}},
		{"owner and state", store.ListFilter{OwnerID: "bob", States: []sandbox.State{running}}, []string{"b1"}},
		{"owner and backend", store.ListFilter{OwnerID: "alice", Backend: "native"}, []string{"a1", "a2"}},
		{"unknown owner", store.ListFilter{OwnerID: "carol"}, nil},
		{"owner is no metadata", store.ListFilter{Metadata: map[string]string{"owner": "admin"}}, nil},
		{"nothing matches all", store.ListFilter{Backend: "docker", Metadata: map[string]string{"team": "edge"}}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, total, err := st.ListSandboxes(t.Context(), tc.f)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) || total != len(tc.want) {
				t.Errorf("list = %v (total %d), want %v (total %d)", ids(got), total, tc.want, len(tc.want))
			}
		})
	}
	// Listed records are complete.
	got, _, err := st.ListSandboxes(t.Context(), store.ListFilter{Metadata: map[string]string{"team": "core", "owner": "alice"}})
	if err != nil || len(got) != 1 {
		t.Fatalf("list a1: %v, %v", ids(got), err)
	}
	checkSandbox(t, got[0], mustGet(t, st, "a1"))
}

func testListPaging(t *testing.T, st store.Store) {
	listFixture(t, st)
	alice := map[string]string{"owner": "alice"}
	tests := []struct {
		name  string
		f     store.ListFilter
		want  []string
		total int
	}{
		{"page 1", store.ListFilter{Page: 1, PageSize: 3}, []string{"c1", "Z9", "a1"}, 7},
		{"page 2", store.ListFilter{Page: 2, PageSize: 3}, []string{"a2", "b1", "b2"}, 7},
		{"last page", store.ListFilter{Page: 3, PageSize: 3}, []string{"c2"}, 7},
		{"past the end", store.ListFilter{Page: 4, PageSize: 3}, nil, 7},
		{"page 0 is page 1", store.ListFilter{Page: 0, PageSize: 3}, []string{"c1", "Z9", "a1"}, 7},
		{"page size 0 is all", store.ListFilter{Page: 2}, []string{"c1", "Z9", "a1", "a2", "b1", "b2", "c2"}, 7},
		{"one page holds all", store.ListFilter{Page: 1, PageSize: 100}, []string{"c1", "Z9", "a1", "a2", "b1", "b2", "c2"}, 7},
		{"filtered page", store.ListFilter{Metadata: alice, Page: 2, PageSize: 2}, []string{"c2"}, 3},
		{"filtered past the end", store.ListFilter{Metadata: alice, Page: 3, PageSize: 2}, nil, 3},
		{"owner's page 1", store.ListFilter{OwnerID: "alice", Page: 1, PageSize: 2}, []string{"a1", "a2"}, 3},
		{"owner's page 2", store.ListFilter{OwnerID: "alice", Page: 2, PageSize: 2}, []string{"c2"}, 3},
		{"owner's past the end", store.ListFilter{OwnerID: "alice", Page: 3, PageSize: 2}, nil, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, total, err := st.ListSandboxes(t.Context(), tc.f)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			if !slices.Equal(ids(got), tc.want) || total != tc.total {
				t.Errorf("list = %v (total %d), want %v (total %d)", ids(got), total, tc.want, tc.total)
			}
		})
	}
}

func testCountActive(t *testing.T, st store.Store) {
	if n, err := st.CountActive(t.Context(), ""); err != nil || n != 0 {
		t.Errorf("count of an empty store = %d, %v; want 0", n, err)
	}
	listFixture(t, st)
	tests := []struct {
		backend string
		want    int
	}{
		{"", 5}, // a1 a2 b1 c2 Z9; not b2 (Terminated) nor c1 (Failed)
		{"native", 3},
		{"docker", 1},
		{"kube", 1},
		{"nope", 0},
	}
	for _, tc := range tests {
		if n, err := st.CountActive(t.Context(), tc.backend); err != nil || n != tc.want {
			t.Errorf("CountActive(%q) = %d, %v; want %d", tc.backend, n, err, tc.want)
		}
	}
	// A box that ends stops counting.
	s := mustGet(t, st, "b1")
	s.State = sandbox.StateTerminated
	if err := st.UpdateSandbox(t.Context(), s); err != nil {
		t.Fatalf("update: %v", err)
	}
	if n, err := st.CountActive(t.Context(), "docker"); err != nil || n != 0 {
		t.Errorf("CountActive(docker) after termination = %d, %v; want 0", n, err)
	}
}
