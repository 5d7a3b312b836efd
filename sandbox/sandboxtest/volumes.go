package sandboxtest

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// HostPathRooter is implemented by harnesses whose Provider allows
// host-path volumes under a directory the harness made for the suite
// (empty, on the host the backend mounts from). The host-path cases of
// Volumes need it.
type HostPathRooter interface {
	HostPathRoot() string
}

// testVolumes checks named and host-path volumes: what one box writes the
// next one reads, with the owners the box saw; read-only and sub-path
// mounts; paths that would lead elsewhere through a link or "..", refused
// before anything starts; a volume in use cannot be deleted, and deleting
// boxes leaves named volumes.
func testVolumes(t *testing.T, h Harness) {
	p := h.Provider()
	vp, ok := p.(sandbox.Volumer)
	switch claimed := p.Capabilities().PersistentWorkspace; {
	case claimed && !ok:
		t.Fatalf("backend %s claims named volumes but does not implement sandbox.Volumer", p.Name())
	case !claimed:
		t.Skipf("backend %s offers no named volumes", p.Name())
	}
	withVolumes := func(vols ...sandbox.Volume) *sandbox.Spec {
		s := h.Spec()
		s.Volumes = vols
		return &s
	}
	claim := "t-" + NewID()
	t.Cleanup(func() { _ = vp.DeleteVolume(ctxFor(t, time.Minute), claim) })

	t.Run("NamedVolumePersistsAcrossBoxes", func(t *testing.T) {
		b1 := NewBox(t, h, withVolumes(sandbox.Volume{Name: "data", Claim: claim, MountPath: "/mnt/data"}))
		mustRun(t, b1, "echo hello > /mnt/data/file && mkdir -p /mnt/data/sub/deep && echo inner > /mnt/data/sub/deep/f"+
			" && touch /mnt/data/owned && chown 1000:1001 /mnt/data/owned")
		if out := mustRun(t, b1, "stat -c '%u:%g' /mnt/data/file /mnt/data/owned"); out != "0:0\n1000:1001\n" {
			t.Fatalf("owners in the first box: %q", out)
		}
		deleteBox(t, p, b1.ID)
		if lc, ok := h.(LeakChecker); ok {
			lc.CheckGone(t, b1.ID)
		}
		vols, err := vp.ListVolumes(ctxFor(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(vols, func(v sandbox.VolumeInfo) bool { return v.Name == claim })
		if i < 0 || len(vols[i].InUse) != 0 {
			t.Fatalf("after its box is deleted the volume is %+v (list %+v), want it kept and unused", i, vols)
		}
		b2 := NewBox(t, h, withVolumes(sandbox.Volume{Name: "again", Claim: claim, MountPath: "/data"}))
		if out := mustRun(t, b2, "cat /data/file; stat -c '%u:%g' /data/file /data/owned"); out != "hello\n0:0\n1000:1001\n" {
			t.Fatalf("the next box reads %q, want the file with the owners the first box saw", out)
		}
		if code, _, _ := shell(t, b2, uidPtr(1000), "touch /data/x"); code == 0 {
			t.Fatal("uid 1000 wrote to the volume root owned by root (mode 0755)")
		}
	})

	t.Run("ReadOnlyAndSubPath", func(t *testing.T) {
		b := NewBox(t, h, withVolumes(
			sandbox.Volume{Name: "ro", Claim: claim, MountPath: "/ro", ReadOnly: true},
			sandbox.Volume{Name: "sub", Claim: claim, MountPath: "/sub", SubPath: "sub/deep"}))
		if out := mustRun(t, b, "cat /ro/file /sub/f"); out != "hello\ninner\n" {
			t.Fatalf("read %q", out)
		}
		if code, _, _ := shell(t, b, nil, "touch /ro/new"); code == 0 {
			t.Fatal("wrote to a read-only volume")
		}
		if code, _, _ := shell(t, b, nil, "ls /sub/../file /sub/file"); code == 0 {
			t.Fatal("the sub-path mount shows files of the volume above it")
		}
		mustRun(t, b, "echo w > /sub/written && ln -s / /sub/link && ln -s .. /sub/up")
	})

	t.Run("RefusedPaths", func(t *testing.T) {
		cases := []struct {
			name string
			vol  sandbox.Volume
			code sandbox.Code
		}{
			{"subPath dotdot", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/v", SubPath: "../x"}, sandbox.CodeInvalidRequest},
			{"subPath absolute", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/v", SubPath: "/etc"}, sandbox.CodeInvalidRequest},
			{"subPath link to root", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/v", SubPath: "sub/deep/link"}, sandbox.CodeInvalidRequest},
			{"subPath link up", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/v", SubPath: "sub/deep/up/deep"}, sandbox.CodeInvalidRequest},
			{"subPath missing", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/v", SubPath: "nope"}, sandbox.CodeNotFound},
			{"mount on proc", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/proc/x"}, sandbox.CodeInvalidRequest},
			{"mount path dotdot", sandbox.Volume{Name: "v", Claim: claim, MountPath: "/a/../proc"}, sandbox.CodeInvalidRequest},
			{"bad claim", sandbox.Volume{Name: "v", Claim: "../x", MountPath: "/v"}, sandbox.CodeInvalidRequest},
			{"missing claim", sandbox.Volume{Name: "v", Claim: "t-missing-" + NewID(), MustExist: true, MountPath: "/v"}, sandbox.CodeNotFound},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				wantCreateRefused(t, h, *withVolumes(c.vol), c.code)
			})
		}
	})

	t.Run("DeleteVolume", func(t *testing.T) {
		name := "t-" + NewID()
		b := NewBox(t, h, withVolumes(sandbox.Volume{Name: "v", Claim: name, MountPath: "/v"}))
		ctx := ctxFor(t, time.Minute)
		if err := vp.DeleteVolume(ctx, name); sandbox.CodeOf(err) != sandbox.CodeConflict {
			t.Fatalf("delete of a volume in use: want CONFLICT, got %v", err)
		}
		deleteBox(t, p, b.ID)
		if err := vp.DeleteVolume(ctx, name); err != nil {
			t.Fatalf("delete volume: %v", err)
		}
		if err := vp.DeleteVolume(ctx, name); sandbox.CodeOf(err) != sandbox.CodeNotFound {
			t.Fatalf("second delete: want NOT_FOUND, got %v", err)
		}
		vols, err := vp.ListVolumes(ctx)
		if err != nil || slices.ContainsFunc(vols, func(v sandbox.VolumeInfo) bool { return v.Name == name }) {
			t.Fatalf("deleted volume still listed: %+v, %v", vols, err)
		}
	})

	t.Run("HostPath", func(t *testing.T) { testHostPathVolumes(t, h) })
}

func testHostPathVolumes(t *testing.T, h Harness) {
	p := h.Provider()
	hr, ok := h.(HostPathRooter)
	if !ok || !p.Capabilities().HostPathVolumes {
		t.Skipf("backend %s offers no host-path volumes here (or the harness has no host path root)", p.Name())
	}
	root := hr.HostPathRoot()
	dir := filepath.Join(root, "shared")
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "from-host"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(dir, "from-host"), 1000, 1000); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for name, target := range map[string]string{"escape": outside, "sub/up": "../..", "rel": "sub"} {
		if err := os.Symlink(target, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	spec := func(v sandbox.Volume) sandbox.Spec {
		s := h.Spec()
		v.Name, v.MountPath = "host", "/mnt/host"
		s.Volumes = []sandbox.Volume{v}
		return s
	}
	t.Run("ReadWrite", func(t *testing.T) {
		s := spec(sandbox.Volume{HostPath: dir})
		b := NewBox(t, h, &s)
		if out := mustRun(t, b, "cat /mnt/host/from-host; stat -c '%u:%g' /mnt/host/from-host"); out != "host\n1000:1000\n" {
			t.Fatalf("box reads %q, want the host's file with its owner", out)
		}
		mustRun(t, b, "echo box > /mnt/host/from-box && chown 1000:1000 /mnt/host/from-box")
		deleteBox(t, p, b.ID)
		if lc, ok := h.(LeakChecker); ok {
			lc.CheckGone(t, b.ID)
		}
		got, err := os.ReadFile(filepath.Join(dir, "from-box"))
		if err != nil || string(got) != "box\n" {
			t.Fatalf("host reads %q, %v", got, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "from-box")); err != nil || ownerOf(fi) != "1000:1000" {
			t.Fatalf("the box's file is owned %s on the host, want 1000:1000 as the box saw it (%v)", ownerOf(fi), err)
		}
	})
	t.Run("ReadOnlySubPath", func(t *testing.T) {
		s := spec(sandbox.Volume{HostPath: dir, SubPath: "sub", ReadOnly: true})
		b := NewBox(t, h, &s)
		if code, _, _ := shell(t, b, nil, "touch /mnt/host/x"); code == 0 {
			t.Fatal("wrote to a read-only host path")
		}
		if code, _, _ := shell(t, b, nil, "ls /mnt/host/from-host"); code == 0 {
			t.Fatal("the sub-path mount shows its parent's files")
		}
	})
	cases := []struct {
		name string
		vol  sandbox.Volume
		code sandbox.Code
	}{
		{"outside the roots", sandbox.Volume{HostPath: outside}, sandbox.CodeInvalidRequest},
		{"the host root", sandbox.Volume{HostPath: "/"}, sandbox.CodeInvalidRequest},
		{"link out of the root", sandbox.Volume{HostPath: filepath.Join(dir, "escape")}, sandbox.CodeInvalidRequest},
		{"link within the root", sandbox.Volume{HostPath: filepath.Join(dir, "rel")}, sandbox.CodeInvalidRequest},
		{"subPath through a link up", sandbox.Volume{HostPath: dir, SubPath: "sub/up"}, sandbox.CodeInvalidRequest},
		{"subPath through a link out", sandbox.Volume{HostPath: dir, SubPath: "escape"}, sandbox.CodeInvalidRequest},
		{"missing", sandbox.Volume{HostPath: filepath.Join(dir, "nope")}, sandbox.CodeNotFound},
		{"not clean", sandbox.Volume{HostPath: dir + "/../" + filepath.Base(outside)}, sandbox.CodeInvalidRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := wantCreateRefused(t, h, spec(c.vol), c.code)
			if c.name == "outside the roots" && !strings.Contains(sandbox.MessageOf(err), root) {
				t.Errorf("refusal %q does not name the allowed root %s", sandbox.MessageOf(err), root)
			}
		})
	}
}

// wantCreateRefused creates a box from s and fails unless that fails
// with code; it returns the error.
func wantCreateRefused(t *testing.T, h Harness, s sandbox.Spec, code sandbox.Code) error {
	t.Helper()
	p := h.Provider()
	id := NewID()
	_, err := p.Create(ctxFor(t, time.Minute), id, s)
	if err == nil {
		deleteBox(t, p, id)
		t.Fatalf("create succeeded, want %s", code)
	}
	if got := sandbox.CodeOf(err); got != code {
		t.Fatalf("create: want %s, got %v", code, err)
	}
	if lc, ok := h.(LeakChecker); ok {
		lc.CheckGone(t, id)
	}
	return err
}

func deleteBox(t testing.TB, p sandbox.Provider, id string) {
	t.Helper()
	if err := p.Delete(ctxFor(t, time.Minute), id); err != nil {
		t.Fatalf("delete box %s: %v", id, err)
	}
}

// ownerOf is "uid:gid" of fi ("?" without one).
func ownerOf(fi os.FileInfo) string {
	if fi == nil {
		return "?"
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return "?"
	}
	return strconv.FormatUint(uint64(st.Uid), 10) + ":" + strconv.FormatUint(uint64(st.Gid), 10)
}
