package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// newVault returns a complete vault with the given id and two secrets;
// each mod then changes it.
func newVault(id string, mods ...func(*store.Vault)) *store.Vault {
	v := &store.Vault{
		ID:          id,
		Name:        "Vault " + id,
		Description: "Keys of the team.\nRotate monthly.",
		Secrets: []store.VaultSecret{
			{Name: "GITHUB_TOKEN", Host: "api.github.com", PathPrefix: "/", Header: "Authorization", Format: "Bearer {value}",
				Sealed: "sealed:v1:0011223344556677:AAAA", UpdatedAt: at(time.Minute)},
			{Name: "STRIPE_KEY", Host: "*.stripe.com", PathPrefix: "/v1/", Header: "X-Api-Key", Format: "{value}",
				Sealed: "sealed:v1:0011223344556677:BBBB", UpdatedAt: at(2 * time.Minute)},
		},
		CreatedAt: t0,
		UpdatedAt: at(time.Second),
	}
	for _, m := range mods {
		m(v)
	}
	return v
}

// checkVault fails t unless got is want as read back from a store.
func checkVault(t *testing.T, got, want *store.Vault) {
	t.Helper()
	same := got.ID == want.ID && got.Name == want.Name && got.Description == want.Description &&
		got.Version == want.Version && len(got.Secrets) == len(want.Secrets) &&
		sameTime(got.CreatedAt, want.CreatedAt) && sameTime(got.UpdatedAt, want.UpdatedAt)
	for i := 0; same && i < len(want.Secrets); i++ {
		g, w := got.Secrets[i], want.Secrets[i]
		same = g.Name == w.Name && g.Host == w.Host && g.PathPrefix == w.PathPrefix && g.Header == w.Header &&
			g.Format == w.Format && g.Sealed == w.Sealed && sameTime(g.UpdatedAt, w.UpdatedAt)
	}
	if !same {
		t.Errorf("vault = %+v, want %+v", *got, *want)
	}
}

// mustGetVault gets vault id or fails t.
func mustGetVault(t *testing.T, st store.Store, id string) *store.Vault {
	t.Helper()
	v, err := st.GetVault(t.Context(), id)
	if err != nil {
		t.Fatalf("get vault %s: %v", id, err)
	}
	return v
}

func testVaults(t *testing.T, st store.Store) {
	ctx := t.Context()
	tests := []struct {
		name string
		in   *store.Vault
	}{
		{"full", newVault("full")},
		{"no secret", newVault("empty", func(v *store.Vault) { v.Secrets = nil })},
		{"empty strings", &store.Vault{ID: "blank", CreatedAt: t0, UpdatedAt: t0}},
		{"unicode", newVault("ünï-✓", func(v *store.Vault) {
			v.Name, v.Description = `q"uote ✓`, "line\u2028separator"
			v.Secrets[0].Format = `Token "{value}" ü`
		})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := st.CreateVault(ctx, tc.in); err != nil {
				t.Fatalf("create: %v", err)
			}
			if tc.in.Version != 1 {
				t.Errorf("Version after create = %d, want 1", tc.in.Version)
			}
			checkVault(t, mustGetVault(t, st, tc.in.ID), tc.in)
		})
	}

	t.Run("zero times", func(t *testing.T) {
		before := time.Now()
		in := newVault("zero-times", func(v *store.Vault) { v.CreatedAt, v.UpdatedAt = time.Time{}, time.Time{} })
		if err := st.CreateVault(ctx, in); err != nil {
			t.Fatalf("create: %v", err)
		}
		if in.CreatedAt.Before(before.Add(-time.Second)) || in.CreatedAt.After(time.Now().Add(time.Second)) {
			t.Errorf("written back CreatedAt = %v, want about now", in.CreatedAt)
		}
		checkVault(t, mustGetVault(t, st, in.ID), in)
	})

	t.Run("conflict", func(t *testing.T) {
		checkErr(t, "second create", st.CreateVault(ctx, newVault("full", func(v *store.Vault) { v.Name = "other" })), store.ErrConflict)
		checkVault(t, mustGetVault(t, st, "full"), newVault("full", func(v *store.Vault) { v.Version = 1 }))
	})

	t.Run("not found", func(t *testing.T) {
		_, err := st.GetVault(ctx, "absent")
		checkErr(t, "get", err, store.ErrNotFound)
		checkErr(t, "update", st.UpdateVault(ctx, newVault("absent", func(v *store.Vault) { v.Version = 1 })), store.ErrNotFound)
		checkErr(t, "delete", st.DeleteVault(ctx, "absent"), store.ErrNotFound)
	})

	t.Run("delete", func(t *testing.T) {
		if err := st.DeleteVault(ctx, "full"); err != nil {
			t.Fatalf("delete: %v", err)
		}
		_, err := st.GetVault(ctx, "full")
		checkErr(t, "get after delete", err, store.ErrNotFound)
		checkErr(t, "delete again", st.DeleteVault(ctx, "full"), store.ErrNotFound)
	})
}

func testVaultUpdate(t *testing.T, st store.Store) {
	ctx := t.Context()
	if err := st.CreateVault(ctx, newVault("v")); err != nil {
		t.Fatalf("create: %v", err)
	}
	v := mustGetVault(t, st, "v")
	v.Name, v.Description = "Renamed", ""
	v.Secrets = append(v.Secrets[1:], store.VaultSecret{Name: "Z_KEY", Host: "z.test", Header: "Authorization",
		Format: "Bearer {value}", Sealed: "sealed:v1:8899aabbccddeeff:CCCC", UpdatedAt: at(time.Hour)})
	v.UpdatedAt = at(time.Hour)
	if err := st.UpdateVault(ctx, v); err != nil {
		t.Fatalf("update: %v", err)
	}
	if v.Version != 2 {
		t.Errorf("Version after update = %d, want 2", v.Version)
	}
	checkTime(t, "written back CreatedAt", v.CreatedAt, t0)
	checkVault(t, mustGetVault(t, st, "v"), v)

	before := time.Now()
	v.UpdatedAt = time.Time{}
	v.Secrets = nil
	if err := st.UpdateVault(ctx, v); err != nil {
		t.Fatalf("update without UpdatedAt: %v", err)
	}
	if v.UpdatedAt.Before(before.Add(-time.Second)) || v.UpdatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("written back UpdatedAt = %v, want about now", v.UpdatedAt)
	}
	checkVault(t, mustGetVault(t, st, "v"), v)

	current := *v
	for _, ver := range []int64{0, 1, 2, 4, 100} {
		stale := newVault("v", func(s *store.Vault) { s.Version, s.Name = ver, "stale" })
		checkErr(t, fmt.Sprintf("update with version %d", ver), st.UpdateVault(ctx, stale), store.ErrConflict)
		if stale.Version != ver {
			t.Errorf("a refused update changed Version from %d to %d", ver, stale.Version)
		}
	}
	checkVault(t, mustGetVault(t, st, "v"), &current)
}

func testVaultList(t *testing.T, st store.Store) {
	ctx := t.Context()
	all := []string{"B", "_x", "a", "b", "c", "ü"} // byte-wise
	for _, id := range []string{"c", "a", "ü", "B", "b", "_x"} {
		if err := st.CreateVault(ctx, newVault(id)); err != nil {
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
		{"first page", "", 2, all[:2]},
		{"second page", "_x", 2, all[2:4]},
		{"after a missing id", "ab", 2, []string{"b", "c"}},
		{"after the last", "ü", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ListVaults(ctx, tc.afterID, tc.limit)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var ids []string
			for _, v := range got {
				ids = append(ids, v.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("listed %v, want %v", ids, tc.want)
			}
		})
	}
	if got, err := st.ListVaults(ctx, "", 1); err != nil || len(got) != 1 {
		t.Fatalf("list one: %v, %v", got, err)
	} else {
		checkVault(t, got[0], newVault("B", func(v *store.Vault) { v.Version = 1 }))
	}
}
