package sandbox

import (
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateVolumes(t *testing.T) {
	ok := Volume{Name: "v", Claim: "data", MountPath: "/mnt/data"}
	with := func(f func(*Volume)) []Volume { v := ok; f(&v); return []Volume{v} }
	cases := []struct {
		name string
		vols []Volume
		want string // "" or a piece of the message
	}{
		{"named", with(func(*Volume) {}), ""},
		{"host", with(func(v *Volume) { v.Claim, v.HostPath = "", "/srv/x" }), ""},
		{"subPath cleaned", with(func(v *Volume) { v.SubPath = "a/./b/" }), ""},
		{"no source", with(func(v *Volume) { v.Claim = "" }), "exactly one source"},
		{"two sources", with(func(v *Volume) { v.HostPath = "/srv" }), "exactly one source"},
		{"bad name", with(func(v *Volume) { v.Name = "V_1" }), "invalid volume name"},
		{"bad claim", with(func(v *Volume) { v.Claim = "a/b" }), "invalid volume name"},
		{"relative mount", with(func(v *Volume) { v.MountPath = "mnt" }), "absolute"},
		{"unclean mount", with(func(v *Volume) { v.MountPath = "/mnt/../proc" }), "clean"},
		{"root mount", with(func(v *Volume) { v.MountPath = "/" }), "on /"},
		{"proc", with(func(v *Volume) { v.MountPath = "/proc" }), "under /proc"},
		{"astrabox", with(func(v *Volume) { v.MountPath = "/.astrabox/x" }), "under /.astrabox"},
		{"dev", with(func(v *Volume) { v.MountPath = "/dev/shm" }), "under /dev"},
		{"devices ok", with(func(v *Volume) { v.MountPath = "/devices" }), ""},
		{"host relative", with(func(v *Volume) { v.Claim, v.HostPath = "", "srv" }), "absolute"},
		{"host unclean", with(func(v *Volume) { v.Claim, v.HostPath = "", "/srv/../etc" }), "clean"},
		{"host mustExist", with(func(v *Volume) { v.Claim, v.HostPath, v.MustExist = "", "/srv", true }), "named volumes only"},
		{"subPath up", with(func(v *Volume) { v.SubPath = "a/../../b" }), "'..'"},
		{"subPath abs", with(func(v *Volume) { v.SubPath = "/a" }), "relative"},
		{"subPath nul", with(func(v *Volume) { v.SubPath = "a\x00" }), "NUL"},
		{"dup name", []Volume{ok, {Name: "v", Claim: "x", MountPath: "/x"}}, "twice"},
		{"dup mount", []Volume{ok, {Name: "w", Claim: "x", MountPath: "/mnt/data"}}, "twice"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := validateVolumes(c.vols)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(MessageOf(err), c.want)):
				t.Fatalf("want an error with %q, got %v", c.want, err)
			case err != nil && CodeOf(err) != CodeInvalidRequest:
				t.Fatalf("code %s", CodeOf(err))
			}
		})
	}
	s := Spec{Volumes: with(func(v *Volume) { v.SubPath = "a/./b/" })}
	if err := s.Validate(); err != nil || s.Volumes[0].SubPath != "a/b" {
		t.Fatalf("Validate: %v, subPath %q", err, s.Volumes[0].SubPath)
	}
}

func TestCapabilitiesCheckVolumes(t *testing.T) {
	named := Spec{Volumes: []Volume{{Name: "v", Claim: "c", MountPath: "/v"}}}
	host := Spec{Volumes: []Volume{{Name: "v", HostPath: "/srv", MountPath: "/v"}}}
	if err := (Capabilities{}).Check(named); CodeOf(err) != CodeCapability || !strings.Contains(MessageOf(err), "persistent-workspace (volumes)") {
		t.Fatalf("no volumes: %v", err)
	}
	if err := (Capabilities{PersistentWorkspace: true}).Check(named); err != nil {
		t.Fatal(err)
	}
	if err := (Capabilities{PersistentWorkspace: true}).Check(host); CodeOf(err) != CodeCapability {
		t.Fatalf("host paths without roots: %v", err)
	}
	if err := (Capabilities{PersistentWorkspace: true, HostPathVolumes: true}).Check(host); err != nil {
		t.Fatal(err)
	}
}

func TestVolumesInMountOrder(t *testing.T) {
	got := VolumesInMountOrder([]Volume{{MountPath: "/a/b/c"}, {MountPath: "/a"}, {MountPath: "/a/b"}, {MountPath: "/a-b"}})
	for i := 1; i < len(got); i++ {
		for j := i; j < len(got); j++ {
			if HostPathUnder(got[i-1].MountPath, got[j].MountPath) && got[i-1].MountPath != got[j].MountPath {
				t.Fatalf("%s comes before %s, which it lies under: %v", got[i-1].MountPath, got[j].MountPath, got)
			}
		}
	}
}

// FuzzCleanSubPath checks that an accepted sub-path never leaves its
// volume: it is empty or local, clean and free of "..".
func FuzzCleanSubPath(f *testing.F) {
	for _, s := range []string{"", ".", "a", "a/b", "../a", "a/..", "a/../../b", "/a", "a//b/", "./..", "..a", "a\x00b", "...", "a/./."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, sub string) {
		got, err := CleanSubPath(sub)
		if err != nil {
			if CodeOf(err) != CodeInvalidRequest {
				t.Fatalf("code %s", CodeOf(err))
			}
			return
		}
		if got == "" {
			return
		}
		if !filepath.IsLocal(got) || path.Clean(got) != got || strings.Contains("/"+got+"/", "/../") || strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("CleanSubPath(%q) = %q, which may leave the volume", sub, got)
		}
	})
}
