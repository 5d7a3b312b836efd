package storetest

import (
	"errors"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/store"
)

func testSandboxVaults(t *testing.T, st store.Store) {
	ctx := t.Context()
	if _, err := st.GetSandboxVault(ctx, "sb1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get of none: %v", err)
	}
	v := &store.SandboxVault{SandboxID: "sb1", Revision: 1, Sealed: "sealed:v1:0011223344556677:AAAA", UpdatedAt: at(0)}
	if err := st.PutSandboxVault(ctx, v, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "sb1", Revision: 1, Sealed: "x"}, 0); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second create: %v", err)
	}
	got, err := st.GetSandboxVault(ctx, "sb1")
	if err != nil || got.Revision != 1 || got.Sealed != v.Sealed || !sameTime(got.UpdatedAt, at(0)) {
		t.Fatalf("get: %+v %v", got, err)
	}
	next := &store.SandboxVault{SandboxID: "sb1", Revision: 2, Sealed: "sealed:v1:0011223344556677:BBBB"}
	if err := st.PutSandboxVault(ctx, next, 1); err != nil {
		t.Fatal(err)
	}
	if next.UpdatedAt.IsZero() {
		t.Error("a zero UpdatedAt was not set")
	}
	if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "sb1", Revision: 2, Sealed: "stale"}, 1); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("stale update: %v", err)
	}
	if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "none", Revision: 2, Sealed: "x"}, 1); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of none: %v", err)
	}
	if got, _ := st.GetSandboxVault(ctx, "sb1"); got.Revision != 2 || got.Sealed != next.Sealed {
		t.Fatalf("after update: %+v", got)
	}
	// A re-seal keeps the revision.
	if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "sb1", Revision: 2, Sealed: "resealed"}, 2); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"sb3", "sb2"} {
		if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: id, Revision: 1, Sealed: "s-" + id}, 0); err != nil {
			t.Fatal(err)
		}
	}
	all, err := st.ListSandboxVaults(ctx, "", 0)
	if err != nil || len(all) != 3 || all[0].SandboxID != "sb1" || all[1].SandboxID != "sb2" || all[2].Sealed != "s-sb3" {
		t.Fatalf("list: %+v %v", all, err)
	}
	page, err := st.ListSandboxVaults(ctx, "sb1", 1)
	if err != nil || len(page) != 1 || page[0].SandboxID != "sb2" {
		t.Fatalf("page: %+v %v", page, err)
	}
	if err := st.DeleteSandboxVault(ctx, "sb1"); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteSandboxVault(ctx, "sb1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := st.GetSandboxVault(ctx, "sb1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get after delete: %v", err)
	}
}

// testSandboxVaultRace: of concurrent updates from one revision exactly
// one succeeds.
func testSandboxVaultRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	if err := st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "sb", Revision: 1, Sealed: "r1"}, 0); err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			errs[i] = st.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: "sb", Revision: 2, Sealed: "r2"}, 1)
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch {
		case err == nil:
			ok++
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("concurrent update: %v", err)
		}
	}
	if ok != 1 {
		t.Fatalf("%d concurrent updates from one revision succeeded, want 1", ok)
	}
}
