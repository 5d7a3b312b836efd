package native_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// TestVolumeFilesAreStoredAsTheBoxSeesThem checks the idmapping of a
// named volume: the box runs as an unprivileged host uid range, yet what
// its root writes is owned by 0 on disk (and uid 1000 in the box by 1000),
// so the next box, on another uid range, sees the same owners; nothing of
// the volume stays mounted on the host after the box is gone.
func TestVolumeFilesAreStoredAsTheBoxSeesThem(t *testing.T) {
	h := newHarness(t)
	s := h.Spec()
	s.Volumes = []sandbox.Volume{{Name: "w", Claim: "work", MountPath: "/workspace"}}
	b := sandboxtest.NewBox(t, h, &s)
	_, uidMap, _ := sh(t, b, nil, "cat /proc/self/uid_map")
	if f := strings.Fields(uidMap); len(f) != 3 || f[0] != "0" || f[1] == "0" {
		t.Fatalf("box uid map %q: want box root mapped to an unprivileged host uid", uidMap)
	}
	if code, _, stderr := sh(t, b, nil, "echo x > /workspace/root-file && echo y > /workspace/user-file && chown 1000:1000 /workspace/user-file"); code != 0 {
		t.Fatalf("write: %s", stderr)
	}
	data := filepath.Join(h.dataDir, "volumes", "work", "data")
	for name, want := range map[string]uint32{"root-file": 0, "user-file": 1000} {
		fi, err := os.Stat(filepath.Join(data, name))
		if err != nil {
			t.Fatal(err)
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != want || st.Gid != want {
			t.Errorf("%s is owned %d:%d on disk, want %d:%d", name, st.Uid, st.Gid, want, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(h.dataDir, "volumes")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("volumes dir: %v, %v (want mode 0700: host users must not reach box files)", fi, err)
	}
	if err := h.p.Delete(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), data) {
		t.Error("the volume is left mounted on the host")
	}
	if _, err := os.Stat(filepath.Join(data, "root-file")); err != nil {
		t.Errorf("the named volume's files went with the box: %v", err)
	}
	if err := h.p.DeleteVolume(ctx(t), "work"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "volumes", "work")); !os.IsNotExist(err) {
		t.Errorf("deleted volume's directory: %v", err)
	}
}

// TestVolumeMountPathThroughALinkIsRefused mounts a volume at a path
// through a symbolic link of the box's root (the host image's /bin links
// to usr/bin): init refuses it rather than mount wherever the link leads.
func TestVolumeMountPathThroughALinkIsRefused(t *testing.T) {
	h := newHarness(t)
	s := h.Spec()
	s.Volumes = []sandbox.Volume{{Name: "w", Claim: "linked", MountPath: "/bin/astrabox-vol"}}
	id := sandboxtest.NewID()
	if _, err := h.p.Create(ctx(t), id, s); err == nil {
		_ = h.p.Delete(ctx(t), id)
		t.Fatal("a mount path through a link was accepted")
	} else if !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("refusal does not say why: %v", err)
	}
	h.CheckGone(t, id)
	if _, err := os.Lstat("/usr/bin/astrabox-vol"); !os.IsNotExist(err) {
		t.Errorf("a mount point was made on the host's /usr/bin: %v", err)
	}
}
