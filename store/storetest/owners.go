package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// owned returns "kind/backend/name@owner" of each of os, in order.
func owned(os []*store.ResourceOwner) []string {
	out := make([]string, len(os))
	for i, o := range os {
		out[i] = o.Kind + "/" + o.Backend + "/" + o.Name + "@" + o.OwnerID
	}
	return out
}

func testResourceOwners(t *testing.T, st store.Store) {
	ctx := t.Context()
	o := &store.ResourceOwner{Kind: store.ResourceVolume, Backend: "native", Name: "work", OwnerID: "alice", OrgID: "acme", CreatedAt: t0}
	if err := st.SetOwner(ctx, o); err != nil {
		t.Fatalf("set: %v", err)
	}
	checkTime(t, "created_at written back", o.CreatedAt, t0)
	got, err := st.GetOwner(ctx, store.ResourceVolume, "native", "work")
	if err != nil || got.OwnerID != "alice" || got.OrgID != "acme" || got.Kind != store.ResourceVolume || got.Backend != "native" || got.Name != "work" {
		t.Fatalf("get: %+v, %v", got, err)
	}
	checkTime(t, "created_at", got.CreatedAt, t0)

	// The owner again: nil, the first record kept and written back.
	again := &store.ResourceOwner{Kind: store.ResourceVolume, Backend: "native", Name: "work", OwnerID: "alice", OrgID: "other", CreatedAt: at(time.Hour)}
	if err := st.SetOwner(ctx, again); err != nil {
		t.Fatalf("set by the owner again: %v", err)
	}
	if again.OrgID != "acme" {
		t.Errorf("set again wrote back org %q, want acme", again.OrgID)
	}
	checkTime(t, "created_at after set again", again.CreatedAt, t0)
	// Another user: refused, nothing changed.
	checkErr(t, "set by another user", st.SetOwner(ctx, &store.ResourceOwner{Kind: store.ResourceVolume, Backend: "native", Name: "work", OwnerID: "bob"}), store.ErrConflict)
	if got, _ := st.GetOwner(ctx, store.ResourceVolume, "native", "work"); got == nil || got.OwnerID != "alice" {
		t.Errorf("owner after a refused set: %+v", got)
	}

	// Names are per kind and per backend.
	for _, r := range []*store.ResourceOwner{
		{Kind: store.ResourceVolume, Backend: "docker", Name: "work", OwnerID: "bob"},
		{Kind: store.ResourceSnapshot, Backend: "native", Name: "work", OwnerID: "bob"},
		{Kind: store.ResourceVolume, Backend: "native", Name: "Zeta", OwnerID: "alice"},
		{Kind: store.ResourceVolume, Backend: "native", Name: "alpha", OwnerID: "alice"},
		{Kind: store.ResourceSnapshot, Backend: "docker", Name: "snap-1", OwnerID: "alice"},
	} {
		if err := st.SetOwner(ctx, r); err != nil {
			t.Fatalf("set %+v: %v", r, err)
		}
		if r.CreatedAt.IsZero() {
			t.Errorf("set %s: CreatedAt not filled", r.Name)
		}
	}
	_, err = st.GetOwner(ctx, store.ResourceVolume, "kubernetes", "work")
	checkErr(t, "get on another backend", err, store.ErrNotFound)
	_, err = st.GetOwner(ctx, store.ResourceSnapshot, "native", "nope")
	checkErr(t, "get unknown", err, store.ErrNotFound)

	for _, c := range []struct {
		kind, owner string
		want        []string
	}{
		{store.ResourceVolume, "alice", []string{"volume/native/Zeta@alice", "volume/native/alpha@alice", "volume/native/work@alice"}},
		{store.ResourceVolume, "bob", []string{"volume/docker/work@bob"}},
		{store.ResourceVolume, "", []string{"volume/docker/work@bob", "volume/native/Zeta@alice", "volume/native/alpha@alice", "volume/native/work@alice"}},
		{store.ResourceSnapshot, "alice", []string{"snapshot/docker/snap-1@alice"}},
		{store.ResourceSnapshot, "", []string{"snapshot/docker/snap-1@alice", "snapshot/native/work@bob"}},
		{store.ResourceSnapshot, "carol", []string{}},
	} {
		list, err := st.ListOwned(ctx, c.kind, c.owner)
		if err != nil || !slices.Equal(owned(list), c.want) {
			t.Errorf("list %s of %q: %v, %v; want %v", c.kind, c.owner, owned(list), err, c.want)
		}
	}

	if err := st.DeleteOwner(ctx, store.ResourceVolume, "native", "work"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	checkErr(t, "delete again", st.DeleteOwner(ctx, store.ResourceVolume, "native", "work"), store.ErrNotFound)
	_, err = st.GetOwner(ctx, store.ResourceVolume, "native", "work")
	checkErr(t, "get after delete", err, store.ErrNotFound)
	if got, err := st.GetOwner(ctx, store.ResourceVolume, "docker", "work"); err != nil || got.OwnerID != "bob" {
		t.Errorf("the other backend's record after delete: %+v, %v", got, err)
	}
	// Once forgotten, the name is free for anyone.
	if err := st.SetOwner(ctx, &store.ResourceOwner{Kind: store.ResourceVolume, Backend: "native", Name: "work", OwnerID: "bob"}); err != nil {
		t.Errorf("set after delete: %v", err)
	}
}

// testResourceOwnerRace: of users setting the owner of one record at once,
// exactly one gets it and the others ErrConflict.
func testResourceOwnerRace(t *testing.T, st store.Store) {
	const n = 8
	var (
		wg   sync.WaitGroup
		errs [n]error
	)
	for i := range n {
		wg.Go(func() {
			errs[i] = st.SetOwner(t.Context(), &store.ResourceOwner{Kind: store.ResourceSnapshot, Backend: "b", Name: "s", OwnerID: fmt.Sprint("u", i)})
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Errorf("both u%d and u%d own the record", winner, i)
		case err == nil:
			winner = i
		default:
			checkErr(t, fmt.Sprint("u", i), err, store.ErrConflict)
		}
	}
	got, err := st.GetOwner(t.Context(), store.ResourceSnapshot, "b", "s")
	if winner < 0 || err != nil || got.OwnerID != fmt.Sprint("u", winner) {
		t.Errorf("owner %+v, %v; winner u%d", got, err, winner)
	}
}
