package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// pooled returns a mod that makes a record a member of pool created at d,
// with no owner until it is claimed.
func pooled(pool string, d time.Duration, state sandbox.State) func(*store.Sandbox) {
	return func(s *store.Sandbox) {
		s.Pool, s.State, s.CreatedAt, s.ExpiresAt = pool, state, at(d), nil
		s.OwnerID, s.OrgID = "", ""
	}
}

// testPools checks that pool members stay out of users' lists and counts,
// are listed by pool, and are claimed oldest Running first.
func testPools(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreate(t, st, newSandbox("user"))
	mustCreate(t, st, newSandbox("p-new", pooled("py:1", 3*time.Second, sandbox.StateRunning)))
	mustCreate(t, st, newSandbox("p-old", pooled("py:1", time.Second, sandbox.StateRunning)))
	mustCreate(t, st, newSandbox("p-pending", pooled("py:1", 0, sandbox.StatePending)))
	mustCreate(t, st, newSandbox("q", pooled("go:2", 0, sandbox.StateRunning)))
	if got := mustGet(t, st, "p-old").Pool; got != "py:1" {
		t.Fatalf("Pool read back = %q, want py:1", got)
	}

	lists := []struct {
		name string
		f    store.ListFilter
		want []string
	}{
		{"users only by default", store.ListFilter{}, []string{"user"}},
		{"one pool", store.ListFilter{Pool: "py:1"}, []string{"p-pending", "p-old", "p-new"}},
		{"one pool, Running", store.ListFilter{Pool: "py:1", States: []sandbox.State{sandbox.StateRunning}}, []string{"p-old", "p-new"}},
		{"all pools", store.ListFilter{AllPools: true}, []string{"p-pending", "q", "user", "p-old", "p-new"}},
		{"unknown pool", store.ListFilter{Pool: "none"}, nil},
		{"an owner's, all pools", store.ListFilter{OwnerID: "user-alice", AllPools: true}, []string{"user"}},
	}
	for _, tc := range lists {
		got, total, err := st.ListSandboxes(ctx, tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ids(got), tc.want) || total != len(tc.want) {
			t.Errorf("%s: got %v (total %d), want %v", tc.name, ids(got), total, tc.want)
		}
	}
	if n, err := st.CountActive(ctx, ""); err != nil || n != 1 {
		t.Errorf("CountActive = %d, %v; want 1 (pool members are not counted)", n, err)
	}

	before := mustGet(t, st, "p-old")
	claimed, err := st.ClaimPooled(ctx, "py:1")
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	want := *before
	want.Pool, want.Version = "", before.Version+1
	checkSandbox(t, claimed, &want)
	checkSandbox(t, mustGet(t, st, "p-old"), &want)
	// The claimer makes the box its user's, as lifecycle's adopt does.
	claimed.OwnerID, claimed.OrgID = "user-bob", "org-2"
	if err := st.UpdateSandbox(ctx, claimed); err != nil {
		t.Fatalf("give the claimed box its owner: %v", err)
	}
	checkSandbox(t, mustGet(t, st, "p-old"), claimed)
	if got, total, err := st.ListSandboxes(ctx, store.ListFilter{OwnerID: "user-bob"}); err != nil ||
		total != 1 || !slices.Equal(ids(got), []string{"p-old"}) {
		t.Errorf("the claimer's boxes = %v (total %d), %v; want [p-old]", ids(got), total, err)
	}
	if got, err := st.ClaimPooled(ctx, "py:1"); err != nil || got.ID != "p-new" {
		t.Fatalf("second claim = %v, %v; want p-new", got, err)
	}
	_, err = st.ClaimPooled(ctx, "py:1")
	checkErr(t, "claim from a pool with only a Pending member", err, store.ErrNotFound)
	_, err = st.ClaimPooled(ctx, "")
	checkErr(t, "claim from the empty pool", err, store.ErrNotFound)
	if n, err := st.CountActive(ctx, ""); err != nil || n != 3 {
		t.Errorf("CountActive after two claims = %d, %v; want 3", n, err)
	}
	_, err = st.ClaimPooled(canceled(), "go:2")
	if err == nil {
		t.Error("claim with a canceled context succeeded")
	}
}

// testClaimRace has more claimers than members: every member goes to
// exactly one claimer and the rest get ErrNotFound.
func testClaimRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	const members, claimers = 10, 24
	for i := range members {
		mustCreate(t, st, newSandbox(fmt.Sprintf("m%02d", i), pooled("race", time.Duration(i)*time.Second, sandbox.StateRunning)))
	}
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		got     []string
		missing int
	)
	for range claimers {
		wg.Go(func() {
			s, err := st.ClaimPooled(ctx, "race")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, store.ErrNotFound):
				missing++
			case err != nil:
				t.Errorf("claim: %v", err)
			default:
				got = append(got, s.ID)
			}
		})
	}
	wg.Wait()
	slices.Sort(got)
	if len(slices.Compact(slices.Clone(got))) != len(got) || len(got) != members || missing != claimers-members {
		t.Errorf("claims = %v (%d not found); want each of %d members once", got, missing, members)
	}
}
