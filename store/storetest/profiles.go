package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

func testProfiles(t *testing.T, st store.Store) {
	ctx := t.Context()
	if ps, err := st.ListProfiles(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("profiles of an empty store = %v, %v", ps, err)
	}
	puts := []store.Profile{
		{Name: "a", JSON: []byte(`{"backend":"native"}`), UpdatedAt: t0},
		{Name: "B", JSON: []byte(`{"backend":"docker", "image" : "x"}`), UpdatedAt: at(time.Second)},
		{Name: "_c", JSON: []byte(`{}`), UpdatedAt: at(2 * time.Second)},
		{Name: "large", JSON: blob(1 << 20), UpdatedAt: t0},
	}
	for _, p := range puts {
		got, err := st.PutProfile(ctx, p)
		if err != nil {
			t.Fatalf("put %s: %v", p.Name, err)
		}
		p.Version = 1
		checkProfile(t, got, p)
	}
	for _, want := range puts {
		want.Version = 1
		checkProfile(t, mustGetProfile(t, st, want.Name), want)
	}

	// Replace keeps one record, with the new content byte for byte.
	replaced := store.Profile{Name: "a", JSON: []byte(`{"backend":"docker"}`), UpdatedAt: at(time.Hour)}
	got, err := st.PutProfile(ctx, replaced)
	if err != nil {
		t.Fatalf("replace: %v", err)
	}
	replaced.Version = 2
	checkProfile(t, got, replaced)
	checkProfile(t, mustGetProfile(t, st, "a"), replaced)

	list, err := st.ListProfiles(ctx)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Name)
	}
	if want := []string{"B", "_c", "a", "large"}; !slices.Equal(names, want) { // byte-wise
		t.Errorf("profiles listed as %v, want %v", names, want)
	}

	if err := st.DeleteProfile(ctx, "B"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	_, err = st.GetProfile(ctx, "B")
	checkErr(t, "get deleted", err, store.ErrNotFound)
	checkErr(t, "delete again", st.DeleteProfile(ctx, "B"), store.ErrNotFound)
	if list, err := st.ListProfiles(ctx); err != nil || len(list) != 3 {
		t.Errorf("profiles after delete: %d, %v; want 3", len(list), err)
	}
	// Created again, a profile starts over at version 1.
	if got, err := st.PutProfile(ctx, store.Profile{Name: "B", JSON: []byte(`{}`)}); err != nil || got.Version != 1 {
		t.Errorf("put after delete: version %d, %v; want 1", got.Version, err)
	}

	before := time.Now()
	got, err = st.PutProfile(ctx, store.Profile{Name: "now", JSON: []byte(`{}`)})
	if err != nil {
		t.Fatalf("put without UpdatedAt: %v", err)
	}
	if got.UpdatedAt.Before(before.Add(-time.Second)) || got.UpdatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("UpdatedAt returned for a profile put without one = %v, want about now", got.UpdatedAt)
	}
	checkProfile(t, mustGetProfile(t, st, "now"), got)
}

// testProfileVersions puts with a Version: only the stored version is
// replaced.
func testProfileVersions(t *testing.T, st store.Store) {
	ctx := t.Context()
	v1, err := st.PutProfile(ctx, store.Profile{Name: "p", JSON: []byte(`{"v":1}`), UpdatedAt: t0})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	tests := []struct {
		name    string
		put     store.Profile
		want    error
		version int64 // the stored version afterwards
	}{
		{"absent", store.Profile{Name: "absent", Version: 1}, store.ErrNotFound, 0},
		{"stale", store.Profile{Name: "p", JSON: []byte(`{"stale":1}`), Version: 2}, store.ErrConflict, 1},
		{"current", store.Profile{Name: "p", JSON: []byte(`{"v":2}`), UpdatedAt: at(time.Minute), Version: 1}, nil, 2},
		{"the replaced version", store.Profile{Name: "p", JSON: []byte(`{"stale":2}`), Version: 1}, store.ErrConflict, 2},
		{"unconditional", store.Profile{Name: "p", JSON: []byte(`{"v":3}`), UpdatedAt: at(2 * time.Minute)}, nil, 3},
		{"after unconditional", store.Profile{Name: "p", JSON: []byte(`{"v":4}`), UpdatedAt: at(3 * time.Minute), Version: 3}, nil, 4},
	}
	stored := v1
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.PutProfile(ctx, tc.put)
			checkErr(t, "put", err, tc.want)
			if tc.want == nil {
				want := tc.put
				want.Version = tc.version
				checkProfile(t, got, want)
				stored = want
			}
			if tc.put.Name != "p" {
				_, err := st.GetProfile(ctx, tc.put.Name)
				checkErr(t, "get after a refused put", err, store.ErrNotFound)
				return
			}
			checkProfile(t, mustGetProfile(t, st, "p"), stored)
		})
	}
}

// testProfileRace puts from one version in many goroutines: exactly one
// succeeds.
func testProfileRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	if _, err := st.PutProfile(ctx, store.Profile{Name: "p", JSON: []byte(`{}`), UpdatedAt: t0}); err != nil {
		t.Fatalf("create: %v", err)
	}
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, errs[i] = st.PutProfile(ctx, store.Profile{Name: "p", JSON: fmt.Appendf(nil, `{"i":%d}`, i), UpdatedAt: t0, Version: 1})
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("puts %d and %d from version 1 both succeeded", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("put %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no put succeeded")
	}
	checkProfile(t, mustGetProfile(t, st, "p"), store.Profile{Name: "p", JSON: fmt.Appendf(nil, `{"i":%d}`, won), UpdatedAt: t0, Version: 2})
}

// mustGetProfile gets profile name or fails t.
func mustGetProfile(t *testing.T, st store.Store, name string) store.Profile {
	t.Helper()
	p, err := st.GetProfile(t.Context(), name)
	if err != nil {
		t.Fatalf("get profile %s: %v", name, err)
	}
	return p
}

// checkProfile fails t unless got is want as read back from a store.
func checkProfile(t *testing.T, got, want store.Profile) {
	t.Helper()
	if got.Name != want.Name || !bytes.Equal(got.JSON, want.JSON) || !sameTime(got.UpdatedAt, want.UpdatedAt) || got.Version != want.Version {
		t.Errorf("profile = {%s %.40q %v v%d}, want {%s %.40q %v v%d}", got.Name, got.JSON, got.UpdatedAt, got.Version,
			want.Name, want.JSON, want.UpdatedAt, want.Version)
	}
}
