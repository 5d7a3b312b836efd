package storetest

import (
	"bytes"
	"slices"
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
		if err := st.PutProfile(ctx, p); err != nil {
			t.Fatalf("put %s: %v", p.Name, err)
		}
	}
	for _, want := range puts {
		got, err := st.GetProfile(ctx, want.Name)
		if err != nil {
			t.Fatalf("get %s: %v", want.Name, err)
		}
		checkProfile(t, got, want)
	}

	// Replace keeps one record, with the new content byte for byte.
	replaced := store.Profile{Name: "a", JSON: []byte(`{"backend":"docker"}`), UpdatedAt: at(time.Hour)}
	if err := st.PutProfile(ctx, replaced); err != nil {
		t.Fatalf("replace: %v", err)
	}
	got, err := st.GetProfile(ctx, "a")
	if err != nil {
		t.Fatalf("get replaced: %v", err)
	}
	checkProfile(t, got, replaced)

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

	before := time.Now()
	if err := st.PutProfile(ctx, store.Profile{Name: "now", JSON: []byte(`{}`)}); err != nil {
		t.Fatalf("put without UpdatedAt: %v", err)
	}
	if got, err := st.GetProfile(ctx, "now"); err != nil || got.UpdatedAt.Before(before.Add(-time.Second)) {
		t.Errorf("UpdatedAt of a profile put without one = %v, %v; want about now", got.UpdatedAt, err)
	}
}

// checkProfile fails t unless got is want as read back from a store.
func checkProfile(t *testing.T, got, want store.Profile) {
	t.Helper()
	if got.Name != want.Name || !bytes.Equal(got.JSON, want.JSON) || !sameTime(got.UpdatedAt, want.UpdatedAt) {
		t.Errorf("profile = {%s %.40q %v}, want {%s %.40q %v}", got.Name, got.JSON, got.UpdatedAt, want.Name, want.JSON, want.UpdatedAt)
	}
}
