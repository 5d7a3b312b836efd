package sandboxtest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// testSnapshots checks snapshots: what a box wrote over its image, and
// what it removed from it, is what a box started from the snapshot sees;
// the source box runs on; a snapshot in use cannot be deleted, and a
// deleted one is gone.
func testSnapshots(t *testing.T, h Harness) {
	p := h.Provider()
	sn, ok := p.(sandbox.Snapshotter)
	switch claimed := p.Capabilities().Snapshot; {
	case claimed && !ok:
		t.Fatalf("backend %s claims snapshots but does not implement sandbox.Snapshotter", p.Name())
	case !claimed:
		t.Skipf("backend %s offers no snapshots", p.Name())
	}
	ctx := ctxFor(t, 5*time.Minute)
	src := NewBox(t, h, nil)
	mustRun(t, src, "mkdir -p /srv/snap && echo kept > /srv/snap/file && chown 1000:1000 /srv/snap/file && ln -s file /srv/snap/link"+
		" && rm /usr/bin/tac && echo changed > /usr/bin/yes")
	sid := "snap-" + NewID()
	info, err := sn.Snapshot(ctx, src.ID, sandbox.SnapshotRequest{ID: sid, Name: "before import", Entrypoint: []string{"sleep", "infinity"}})
	if sandbox.CodeOf(err) == sandbox.CodeNotSupported {
		t.Skipf("backend %s cannot snapshot boxes of image %q: %v", p.Name(), h.Spec().Image, err)
	}
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	t.Cleanup(func() { _ = sn.DeleteSnapshot(ctxFor(t, time.Minute), sid) })
	if info.ID != sid || info.SandboxID != src.ID || info.Name != "before import" || info.Image == "" || info.CreatedAt.IsZero() {
		t.Fatalf("snapshot info %+v", info)
	}
	mustRun(t, src, "echo after > /srv/snap/later")
	list, err := sn.ListSnapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(list, func(s sandbox.SnapshotInfo) bool { return s.ID == sid })
	if i < 0 || list[i].SandboxID != src.ID || list[i].Image != info.Image || !slices.Equal(list[i].Entrypoint, []string{"sleep", "infinity"}) {
		t.Fatalf("snapshot %s listed as %+v (list %+v)", sid, i, list)
	}

	s := h.Spec()
	s.Image = info.Image
	restored := NewBox(t, h, &s)
	if out := mustRun(t, restored, "cat /srv/snap/file; readlink /srv/snap/link; stat -c %u:%g /srv/snap/file; cat /usr/bin/yes; test ! -e /usr/bin/tac && test ! -e /srv/snap/later && echo no-later"); out != "kept\nfile\n1000:1000\nchanged\nno-later\n" {
		t.Fatalf("the box from the snapshot sees %q", out)
	}
	if err := sn.DeleteSnapshot(ctx, sid); sandbox.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("delete of a snapshot a box runs from: want CONFLICT, got %v", err)
	}
	deleteBox(t, p, restored.ID)
	if err := sn.DeleteSnapshot(ctx, sid); err != nil {
		t.Fatalf("delete snapshot: %v", err)
	}
	if err := sn.DeleteSnapshot(ctx, sid); sandbox.CodeOf(err) != sandbox.CodeNotFound {
		t.Fatalf("second delete: want NOT_FOUND, got %v", err)
	}
	if list, _ := sn.ListSnapshots(ctx); slices.ContainsFunc(list, func(s sandbox.SnapshotInfo) bool { return s.ID == sid }) {
		t.Fatal("deleted snapshot still listed")
	}
	if _, err := sn.Snapshot(ctx, NewID(), sandbox.SnapshotRequest{ID: "snap-" + NewID()}); !errors.Is(err, sandbox.ErrNotFound) {
		t.Fatalf("snapshot of an unknown box: want ErrNotFound, got %v", err)
	}
	if _, err := sn.Snapshot(ctx, src.ID, sandbox.SnapshotRequest{ID: "../x"}); sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("bad snapshot id: %v", err)
	}
}
