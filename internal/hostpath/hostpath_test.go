package hostpath

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// tree makes root/{dir/sub, file} and links out of it every way a path
// can leave: absolute, relative up, to the root itself, and a link
// inside; outside is a sibling of root.
func tree(t testing.TB) (root, outside string) {
	base := t.TempDir()
	base, _ = filepath.EvalSymlinks(base)
	root, outside = filepath.Join(base, "root"), filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "dir", "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "file"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"abs": outside, "up": "..", "dir/upup": "../..", "slash": "/", "in": "dir", "dir/self": "."} {
		if err := os.Symlink(target, filepath.Join(root, name)); err != nil {
			t.Fatal(err)
		}
	}
	return root, outside
}

func fdPath(t testing.TB, fd int) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBeneath(t *testing.T) {
	root, _ := tree(t)
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(rfd)
	cases := []struct {
		rel  string
		want string // the directory under root, or the error code
	}{
		{"", "."}, {".", "."}, {"dir", "dir"}, {"dir/sub", "dir/sub"}, {"dir/../dir/sub", "dir/sub"},
		{"..", string(sandbox.CodeInvalidRequest)}, {"dir/../..", string(sandbox.CodeInvalidRequest)},
		{"abs", string(sandbox.CodeInvalidRequest)}, {"up", string(sandbox.CodeInvalidRequest)},
		{"dir/upup", string(sandbox.CodeInvalidRequest)}, {"slash", string(sandbox.CodeInvalidRequest)},
		{"in", string(sandbox.CodeInvalidRequest)}, {"dir/self/sub", string(sandbox.CodeInvalidRequest)},
		{"abs/x", string(sandbox.CodeInvalidRequest)}, {"/etc", string(sandbox.CodeInvalidRequest)},
		{"file", string(sandbox.CodeInvalidRequest)}, {"missing", string(sandbox.CodeNotFound)},
		{"/proc/self/root", string(sandbox.CodeInvalidRequest)},
	}
	for _, c := range cases {
		t.Run(c.rel, func(t *testing.T) {
			fd, err := Beneath(rfd, c.rel)
			if err != nil {
				if got := string(sandbox.CodeOf(err)); got != c.want {
					t.Fatalf("Beneath(%q): %v, want %s", c.rel, err, c.want)
				}
				return
			}
			defer unix.Close(fd)
			if got := fdPath(t, fd); got != filepath.Join(root, c.want) {
				t.Fatalf("Beneath(%q) opened %s, want %s", c.rel, got, filepath.Join(root, c.want))
			}
		})
	}
}

func TestRootsOpen(t *testing.T) {
	root, outside := tree(t)
	r := Roots{root}
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Roots{{"relative"}, {root + "/"}, {"/"}, {filepath.Join(root, "in")}} {
		if err := bad.Check(); err == nil {
			t.Errorf("roots %q accepted", bad)
		}
	}
	fd, err := r.Open(filepath.Join(root, "dir", "sub"))
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	for _, p := range []string{outside, root + "x", filepath.Join(root, "abs"), filepath.Join(root, "in", "sub"), root + "/dir/../../outside", "/"} {
		if fd, err := r.Open(p); err == nil {
			unix.Close(fd)
			t.Errorf("Open(%s) succeeded", p)
		}
	}
	_, err = r.Open(outside)
	if msg := sandbox.MessageOf(err); !strings.Contains(msg, root) {
		t.Errorf("refusal %q does not name the allowed root", msg)
	}
	if _, err := (Roots{}).Open(outside); !strings.Contains(sandbox.MessageOf(err), "disabled") {
		t.Errorf("no roots: %v", err)
	}
}

// FuzzBeneath checks that no relative path, however made, resolves to a
// directory outside the tree, with Beneath or with MkdirBeneath.
func FuzzBeneath(f *testing.F) {
	for _, s := range []string{"", "dir", "..", "dir/../..", "abs", "up/x", "dir/upup/outside", "slash/etc", "in/sub",
		"dir/self/self", "a/b/c", "dir/sub/../../..", "./dir//sub/", "\x00", "dir/sub/new/../../new2"} {
		f.Add(s)
	}
	root, _ := tree(f)
	rfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, rel string) {
		if len(rel) > 256 {
			return
		}
		for _, open := range []func(int, string) (int, error){Beneath, MkdirBeneath} {
			fd, err := open(rfd, rel)
			if err != nil {
				continue
			}
			got := fdPath(t, fd)
			unix.Close(fd)
			if got != root && !strings.HasPrefix(got, root+"/") {
				t.Fatalf("%q resolved to %s, outside %s", rel, got, root)
			}
		}
	})
}
