package api_test

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// ownedBackend is the process backend with snapshots and named volumes
// kept in memory: a box's named volumes are made on its create (unless
// MustExist) and its snapshots capture nothing, for the owners of both.
type ownedBackend struct {
	sandbox.Provider
	mu    sync.Mutex
	vols  map[string][]string // name -> the boxes mounting it
	snaps map[string]sandbox.SnapshotInfo
}

func (b *ownedBackend) Capabilities() sandbox.Capabilities {
	c := b.Provider.Capabilities()
	c.Snapshot, c.PersistentWorkspace = true, true
	return c
}

func (b *ownedBackend) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	b.mu.Lock()
	for _, v := range spec.Volumes {
		if _, ok := b.vols[v.Claim]; !ok && v.MustExist {
			b.mu.Unlock()
			return sandbox.Info{}, sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", v.Claim)
		}
		b.vols[v.Claim] = append(b.vols[v.Claim], id)
	}
	b.mu.Unlock()
	spec.Volumes = nil // the process backend mounts nothing
	return b.Provider.Create(ctx, id, spec)
}

func (b *ownedBackend) Delete(ctx context.Context, id string) error {
	b.mu.Lock()
	for n, users := range b.vols {
		b.vols[n] = slices.DeleteFunc(users, func(u string) bool { return u == id })
	}
	b.mu.Unlock()
	return b.Provider.Delete(ctx, id)
}

func (b *ownedBackend) ListVolumes(context.Context) ([]sandbox.VolumeInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []sandbox.VolumeInfo{}
	for n, u := range b.vols {
		out = append(out, sandbox.VolumeInfo{Name: n, InUse: slices.Clone(u)})
	}
	return out, nil
}

func (b *ownedBackend) DeleteVolume(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.vols[name]
	switch {
	case !ok:
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
	case len(u) > 0:
		return sandbox.Errorf(sandbox.CodeConflict, "volume %q is mounted by sandbox %s", name, u[0])
	}
	delete(b.vols, name)
	return nil
}

func (b *ownedBackend) Snapshot(_ context.Context, id string, req sandbox.SnapshotRequest) (sandbox.SnapshotInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	info := sandbox.SnapshotInfo{ID: req.ID, SandboxID: id, Name: req.Name, CreatedAt: time.Now(), Image: "host", Entrypoint: req.Entrypoint}
	b.snaps[req.ID] = info
	return info, nil
}

func (b *ownedBackend) ListSnapshots(context.Context) ([]sandbox.SnapshotInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := []sandbox.SnapshotInfo{}
	for _, s := range b.snaps {
		out = append(out, s)
	}
	return out, nil
}

func (b *ownedBackend) DeleteSnapshot(_ context.Context, sid string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.snaps[sid]; !ok {
		return sandbox.Errorf(sandbox.CodeNotFound, "snapshot %q not found", sid)
	}
	delete(b.snaps, sid)
	return nil
}

// TestSnapshotAndVolumeOwners: a snapshot is its maker's and a named volume
// the first user's whose box names it; a member lists, reads, deletes and
// uses only their own (another's answers 404 NOT_FOUND, as a missing one
// does), a viewer reads their own, an administrator everyone's. Snapshots
// and volumes from before owners were kept are the administrator's.
func TestSnapshotAndVolumeOwners(t *testing.T) {
	ob := &ownedBackend{vols: map[string][]string{"old": nil},
		snaps: map[string]sandbox.SnapshotInfo{"snap-legacy": {ID: "snap-legacy", SandboxID: "gone", CreatedAt: time.Unix(1700000000, 0), Image: "host"}}}
	e := newEnvConfig(t, 0, nil, func(c *server.Config) {
		ob.Provider = c.Backends["process"]
		c.Backends["owned"] = ob
	})
	alice := user(t, e, "alice", "member")
	bob := user(t, e, "bob", "member")
	vic := user(t, e, "vic", "viewer")

	create := func(who, key string, extra map[string]any) (int, map[string]any) {
		t.Helper()
		body := map[string]any{"backend": "owned", "timeout": 600, "resourceLimits": map[string]string{}}
		if extra["snapshotId"] == nil {
			body["image"], body["entrypoint"] = map[string]any{"uri": "host"}, []string{"sleep", "300"}
		}
		for k, v := range extra {
			body[k] = v
		}
		return callAs(t, e, key, "POST", "/v1/sandboxes", body)
	}
	claim := func(name string) map[string]any {
		return map[string]any{"volumes": []map[string]any{{"name": "data", "pvc": map[string]any{"claimName": name}, "mountPath": "/mnt/data"}}}
	}
	names := func(out map[string]any, field string) []string {
		var got []string
		items, _ := out["items"].([]any)
		for _, it := range items {
			got = append(got, it.(map[string]any)[field].(string))
		}
		sort.Strings(got)
		return got
	}
	expect := func(what string, st int, out map[string]any, wantStatus int, wantCode string) {
		t.Helper()
		if st != wantStatus || (wantCode != "" && out["code"] != wantCode) {
			t.Errorf("%s: %d %v, want %d %s", what, st, out, wantStatus, wantCode)
		}
	}

	// Volumes: bob's box makes bob-data his; alice's cannot mount it, nor
	// the administrator's old one, but makes alice-data hers.
	st, box := create("bob", bob, claim("bob-data"))
	if st != 202 {
		t.Fatalf("bob creates a box with a volume: %d %v", st, box)
	}
	bobBox := box["id"].(string)
	st, out := create("alice", alice, claim("bob-data"))
	expect("alice mounts bob's volume", st, out, 404, "NOT_FOUND")
	st, out = create("alice", alice, claim("old"))
	expect("alice mounts the administrator's volume", st, out, 404, "NOT_FOUND")
	st, out = create("alice", alice, claim("alice-data"))
	expect("alice mounts a new volume", st, out, 202, "")
	aliceBox, _ := out["id"].(string)

	for _, c := range []struct {
		who, key string
		want     []string
	}{{"bob", bob, []string{"bob-data"}}, {"alice", alice, []string{"alice-data"}}, {"vic", vic, nil},
		{"admin", testKey, []string{"alice-data", "bob-data", "old"}}} {
		st, out := callAs(t, e, c.key, "GET", "/v1/volumes", nil)
		if got := names(out, "name"); st != 200 || !slices.Equal(got, c.want) {
			t.Errorf("%s lists volumes %v (%d), want %v", c.who, got, st, c.want)
		}
	}
	for _, path := range []string{"/v1/volumes/bob-data", "/v1/volumes/bob-data?backend=owned", "/v1/volumes/old"} {
		st, out := callAs(t, e, alice, "DELETE", path, nil)
		expect("alice deletes "+path, st, out, 404, "NOT_FOUND")
	}
	st, out = callAs(t, e, vic, "DELETE", "/v1/volumes/bob-data", nil)
	expect("a viewer deletes a volume", st, out, 403, "FORBIDDEN")
	// The administrator may mount bob's volume; it stays bob's.
	st, out = create("admin", testKey, claim("bob-data"))
	expect("the administrator mounts bob's volume", st, out, 202, "")
	adminBox, _ := out["id"].(string)

	// Snapshots: bob's is his.
	st, snap := callAs(t, e, bob, "POST", "/v1/sandboxes/"+bobBox+"/snapshots", map[string]any{"name": "before"})
	if st != 202 {
		t.Fatalf("bob snapshots his box: %d %v", st, snap)
	}
	sid := snap["id"].(string)
	for _, c := range []struct {
		who, key string
		want     []string
	}{{"bob", bob, []string{sid}}, {"alice", alice, nil}, {"vic", vic, nil}, {"admin", testKey, []string{sid, "snap-legacy"}}} {
		st, out := callAs(t, e, c.key, "GET", "/v1/snapshots", nil)
		sort.Strings(c.want)
		if got := names(out, "id"); st != 200 || !slices.Equal(got, c.want) {
			t.Errorf("%s lists snapshots %v (%d), want %v", c.who, got, st, c.want)
		}
	}
	for _, s := range []string{sid, "snap-legacy"} {
		st, out := callAs(t, e, alice, "GET", "/v1/snapshots/"+s, nil)
		expect("alice reads snapshot "+s, st, out, 404, "NOT_FOUND")
		st, out = callAs(t, e, alice, "DELETE", "/v1/snapshots/"+s, nil)
		expect("alice deletes snapshot "+s, st, out, 404, "NOT_FOUND")
		st, out = create("alice", alice, map[string]any{"snapshotId": s})
		expect("alice starts a box from snapshot "+s, st, out, 404, "NOT_FOUND")
	}
	st, out = create("bob", bob, map[string]any{"snapshotId": "snap-legacy"})
	expect("bob starts a box from the administrator's snapshot", st, out, 404, "NOT_FOUND")
	st, out = callAs(t, e, bob, "GET", "/v1/snapshots/"+sid, nil)
	expect("bob reads his snapshot", st, out, 200, "")
	st, out = create("bob", bob, map[string]any{"snapshotId": sid})
	expect("bob starts a box from his snapshot", st, out, 202, "")
	bobBox2, _ := out["id"].(string)
	st, out = callAs(t, e, testKey, "GET", "/v1/snapshots/"+sid, nil)
	expect("the administrator reads bob's snapshot", st, out, 200, "")
	st, out = create("admin", testKey, map[string]any{"snapshotId": sid})
	expect("the administrator starts a box from bob's snapshot", st, out, 202, "")
	adminBox2, _ := out["id"].(string)
	st, out = callAs(t, e, vic, "DELETE", "/v1/snapshots/"+sid, nil)
	expect("a viewer deletes a snapshot", st, out, 403, "FORBIDDEN")

	// Deleting forgets the owner.
	owners := e.svc.Store()
	if o, err := owners.GetOwner(t.Context(), store.ResourceSnapshot, "owned", sid); err != nil || o.OwnerID != "bob" {
		t.Errorf("owner of bob's snapshot: %+v, %v", o, err)
	}
	st, out = callAs(t, e, bob, "DELETE", "/v1/snapshots/"+sid, nil)
	expect("bob deletes his snapshot", st, out, 204, "")
	if _, err := owners.GetOwner(t.Context(), store.ResourceSnapshot, "owned", sid); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner of a deleted snapshot: %v", err)
	}
	for _, id := range []string{bobBox, bobBox2, aliceBox, adminBox, adminBox2} {
		if id == "" {
			continue
		}
		if st, out := callAs(t, e, testKey, "DELETE", "/v1/sandboxes/"+id, nil); st != 204 {
			t.Errorf("delete box %s: %d %v", id, st, out)
		}
	}
	st, out = callAs(t, e, bob, "DELETE", "/v1/volumes/bob-data", nil)
	expect("bob deletes his volume", st, out, 204, "")
	if _, err := owners.GetOwner(t.Context(), store.ResourceVolume, "owned", "bob-data"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("owner of a deleted volume: %v", err)
	}
	// The name is free again: alice's box makes it hers.
	st, out = create("alice", alice, claim("bob-data"))
	expect("alice mounts a deleted volume's name", st, out, 202, "")
	if o, err := owners.GetOwner(t.Context(), store.ResourceVolume, "owned", "bob-data"); err != nil || o.OwnerID != "alice" {
		t.Errorf("owner of the name after alice's create: %+v, %v", o, err)
	}
}
