package image

import (
	"archive/tar"
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

// Where a test's import runs: base/store is the store, base/outside holds
// files an archive must never reach. From an import's root file system,
// base/store/.tmp-*/image/rootfs, "../../../.." is base.
const toBase = "../../../.."

func nlink(t *testing.T, p string) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0
	}
	return st.Nlink
}

func TestMaliciousArchives(t *testing.T) {
	var rnd [6]byte
	rand.Read(rnd[:])
	hostEvil := "/etc/astrabox-test-evil-" + hex.EncodeToString(rnd[:])
	shadowLinks := nlink(t, "/etc/shadow")

	type check func(t *testing.T, rootfs, base string)
	isFile := func(rel, body string) check {
		return func(t *testing.T, rootfs, _ string) {
			t.Helper()
			fi, err := os.Lstat(filepath.Join(rootfs, rel))
			if err != nil || !fi.Mode().IsRegular() {
				t.Fatalf("%s: %v, %v; want a regular file", rel, fi, err)
			}
			if got := readFile(t, filepath.Join(rootfs, rel)); got != body {
				t.Errorf("%s = %q, want %q", rel, got, body)
			}
		}
	}
	tests := []struct {
		name     string
		layers   func(base string) [][]ent
		maxBytes int64
		code     sandbox.Code // "" when the archive is neutralised and imported
		check    check
	}{
		{"dot-dot", func(string) [][]ent { return [][]ent{{reg("../evil", "x")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"dot-dot deep", func(string) [][]ent { return [][]ent{{reg("a/../../../../outside/evil", "x")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"dot-dot directory", func(string) [][]ent { return [][]ent{{dir("../../../../outside/evil")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"absolute name", func(string) [][]ent { return [][]ent{{reg(hostEvil, "x")}} }, 0, "", isFile(strings.TrimPrefix(hostEvil, "/"), "x")},
		{"absolute name of the outside", func(base string) [][]ent { return [][]ent{{reg(base+"/outside/evil", "x")}} }, 0, "",
			func(t *testing.T, rootfs, base string) {
				isFile(strings.TrimPrefix(base, "/")+"/outside/evil", "x")(t, rootfs, base)
			}},
		{"symlink to / then through it", func(base string) [][]ent {
			return [][]ent{{symlink("link", "/"), reg("link"+base+"/outside/evil", "x")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"symlink to / then a directory through it", func(base string) [][]ent {
			return [][]ent{{symlink("link", "/"), dir("link" + base + "/outside/evil")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"relative symlink out then through it", func(string) [][]ent {
			return [][]ent{{symlink("link", toBase), reg("link/outside/evil", "x")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"symlink out, through it in a later layer", func(string) [][]ent {
			return [][]ent{{symlink("link", toBase)}, {reg("link/outside/evil", "x")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"symlink to / in a later layer replacing a directory", func(base string) [][]ent {
			return [][]ent{{dir("d"), reg("d/f", "f")}, {symlink("d", "/")}, {reg("d"+base+"/outside/evil", "x")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"symlink inside the image is not followed either", func(string) [][]ent {
			return [][]ent{{dir("real"), symlink("alias", "real"), reg("alias/f", "x")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"file over a symlink replaces the link", func(base string) [][]ent {
			return [][]ent{{symlink("f", base+"/outside/sentinel")}, {reg("f", "mine")}}
		}, 0, "", isFile("f", "mine")},
		{"directory over a symlink replaces the link", func(base string) [][]ent {
			return [][]ent{{symlink("d", base+"/outside")}, {dir("d"), reg("d/sentinel", "mine")}}
		}, 0, "", isFile("d/sentinel", "mine")},
		{"whiteout through a symlink", func(string) [][]ent {
			return [][]ent{{symlink("link", toBase+"/outside")}, {reg("link/.wh.sentinel", "")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"opaque whiteout through a symlink", func(string) [][]ent {
			return [][]ent{{symlink("link", toBase+"/outside")}, {reg("link/.wh..wh..opq", "")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"whiteout of a symlink removes the link only", func(base string) [][]ent {
			return [][]ent{{symlink("link", base+"/outside")}, {reg(".wh.link", "")}}
		}, 0, "", func(t *testing.T, rootfs, _ string) {
			if exists(filepath.Join(rootfs, "link")) {
				t.Error("link survived its whiteout")
			}
		}},
		{"whiteout climbing out", func(string) [][]ent { return [][]ent{{reg("../.wh.outside", "")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link to /etc/shadow", func(string) [][]ent { return [][]ent{{hardlink("shadow", "/etc/shadow")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link climbing out", func(string) [][]ent {
			return [][]ent{{hardlink("s", toBase+"/outside/sentinel")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link through a symlink", func(base string) [][]ent {
			return [][]ent{{symlink("link", base+"/outside"), hardlink("s", "link/sentinel")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link through a symlink to /", func(string) [][]ent {
			return [][]ent{{symlink("link", "/"), hardlink("shadow", "link/etc/shadow")}}
		}, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link to a directory", func(string) [][]ent { return [][]ent{{dir("d"), hardlink("h", "d")}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"hard link to a symlink links the symlink", func(string) [][]ent {
			return [][]ent{{symlink("s", "/etc/shadow"), hardlink("h", "s")}}
		}, 0, "", func(t *testing.T, rootfs, _ string) {
			if l, err := os.Readlink(filepath.Join(rootfs, "h")); err != nil || l != "/etc/shadow" {
				t.Errorf("h: %q, %v", l, err)
			}
		}},
		{"huge entry", func(string) [][]ent { return [][]ent{{reg("small", "x")}, {{Name: "big", Size: 1 << 40}}} }, 1 << 20, sandbox.CodePayloadTooLarge, nil},
		{"rootfs over the limit", func(string) [][]ent {
			chunk := strings.Repeat("x", 600)
			return [][]ent{{reg("a", chunk), reg("b", chunk)}}
		}, 1000, sandbox.CodePayloadTooLarge, nil},
		{"total over the limit", func(string) [][]ent {
			chunk := strings.Repeat("x", 600)
			return [][]ent{{reg("a", chunk)}, {reg("b", chunk)}}
		}, 1000, sandbox.CodePayloadTooLarge, nil},
		{"within the limit", func(string) [][]ent { return [][]ent{{reg("a", "12345")}} }, 5, "", isFile("a", "12345")},
		{"truncated entry", func(string) [][]ent { return [][]ent{{{Name: "cut", Size: 100}}} }, 0, sandbox.CodeInvalidRequest, nil},
		{"device nodes and fifos skipped", func(string) [][]ent {
			return [][]ent{{
				{Name: "dev/sda", Type: tar.TypeBlock, Mode: 0o660}, {Name: "dev/mem", Type: tar.TypeChar, Mode: 0o666},
				{Name: "fifo", Type: tar.TypeFifo, Mode: 0o600}, reg("ok", "ok"),
			}}
		}, 0, "", func(t *testing.T, rootfs, _ string) {
			for _, p := range []string{"dev/sda", "dev/mem", "fifo"} {
				if exists(filepath.Join(rootfs, p)) {
					t.Errorf("%s created", p)
				}
			}
		}},
		{"setuid kept as data", func(string) [][]ent { return [][]ent{{{Name: "suid", Body: "x", Mode: 0o4755}}} }, 0, "",
			func(t *testing.T, rootfs, _ string) {
				if fi, err := os.Stat(filepath.Join(rootfs, "suid")); err != nil || fi.Mode()&os.ModeSetuid == 0 {
					t.Errorf("suid: %v, %v", fi, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			writeDir(t, outside, []file{{"sentinel", []byte("keep")}, {"dir/inner", []byte("keep")}})
			var arch []byte
			layers := tt.layers(base)
			if len(layers) == 1 {
				arch = tarOfEntries(t, layers[0]...)
			} else {
				var tars [][]byte
				for _, l := range layers {
					tars = append(tars, tarOfEntries(t, l...))
				}
				arch = dockerSave(t, imageConfig(), tars...)
			}
			archPath := writeFile(t, base, "archive", arch)
			store := filepath.Join(base, "store")
			s := openStore(t, store)
			before := snapshot(t, base, store)
			info, err := s.Import(context.Background(), "evil", archPath, ImportOptions{MaxBytes: tt.maxBytes})

			diffSnapshots(t, before, snapshot(t, base, store))
			if exists(hostEvil) {
				os.Remove(hostEvil)
				t.Fatalf("%s was written on the host", hostEvil)
			}
			if got := nlink(t, "/etc/shadow"); got != shadowLinks {
				t.Errorf("/etc/shadow has %d links, had %d", got, shadowLinks)
			}
			if tt.code != "" {
				wantCode(t, err, tt.code)
				if es := storeEntries(t, s); len(es) != 0 {
					t.Errorf("a failed import left %v", es)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Nothing in the store outside the image's root file system.
			if es := storeEntries(t, s); len(es) != 1 || es[0] != "evil+latest" {
				t.Errorf("store holds %v", es)
			}
			if tt.check != nil {
				tt.check(t, info.RootFS, base)
			}
		})
	}
}

func TestCleanName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"a", "a"},
		{"./a/b/", "a/b"},
		{"/etc/passwd", "etc/passwd"},
		{"//x//y", "x/y"},
		{"a/./b/../c", "a/c"},
		{".", "."},
		{"/", "."},
		{"./", "."},
		{"/..", ""},
		{"..", ""},
		{"../a", ""},
		{"a/../..", ""},
		{"a/../../b", ""},
		{"", ""},
		{"a\x00b", ""},
		{"..a", "..a"},
		{"a..", "a.."},
	}
	for _, tt := range tests {
		got, err := cleanName(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("cleanName(%q) = %q, want an error", tt.in, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("cleanName(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

func FuzzCleanName(f *testing.F) {
	for _, s := range []string{"a/b", "/etc/passwd", "../x", "a/../../b", "./.", "//", "..a/..", "a\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := cleanName(s)
		if err != nil {
			return
		}
		if p == "" || strings.HasPrefix(p, "/") || path.Clean(p) != p || p == ".." || strings.HasPrefix(p, "../") || strings.IndexByte(p, 0) >= 0 {
			t.Fatalf("cleanName(%q) = %q", s, p)
		}
		for _, part := range strings.Split(p, "/") {
			if part == ".." {
				t.Fatalf("cleanName(%q) = %q has ..", s, p)
			}
		}
	})
}

// FuzzExtract applies archives of three fuzzed entries (names, link
// targets and types) and checks that nothing outside the root changed. The
// root lies deep enough inside the test's directory that any name with at
// most maxUp ".." components, if it escaped, would still land where the
// check sees it; inputs with more are skipped, and absolute link targets
// are placed under the test's directory, so a bug cannot touch the host.
func FuzzExtract(f *testing.F) {
	f.Add("link", "/", byte(2), "link/outside/evil", "", byte(1), "x", "", byte(0))
	f.Add("a", "", byte(0), "b", "a", byte(3), "c/.wh.b", "", byte(1))
	f.Add("l", "../../../outside", byte(2), "l/sentinel", "", byte(1), "l/.wh..wh..opq", "", byte(1))
	f.Add("d", "", byte(0), "d/.wh..wh..opq", "", byte(1), "h", "l/../d", byte(3))
	const depth, maxUp = 8, 7
	f.Fuzz(func(t *testing.T, n1, l1 string, t1 byte, n2, l2 string, t2 byte, n3, l3 string, t3 byte) {
		for _, s := range []string{n1, l1, n2, l2, n3, l3} {
			if strings.Count(s, "..") > maxUp || len(s) > 200 {
				t.Skip()
			}
		}
		base := t.TempDir()
		writeDir(t, filepath.Join(base, "outside"), []file{{"sentinel", []byte("keep")}, {"dir/inner", []byte("keep")}})
		root := base
		for i := range depth {
			root = filepath.Join(root, "d"+string(rune('0'+i)))
		}
		root = filepath.Join(root, "root")
		if err := os.MkdirAll(root, 0o755); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, base, root)
		var entries []ent
		for _, e := range []struct {
			name, link string
			typ        byte
		}{{n1, l1, t1}, {n2, l2, t2}, {n3, l3, t3}} {
			switch e.typ % 4 {
			case 0:
				entries = append(entries, dir(e.name))
			case 1:
				entries = append(entries, reg(e.name, "fuzz"))
			case 2:
				link := e.link
				if strings.HasPrefix(link, "/") {
					link = filepath.Join(base, link) // stays in the test's directory
				}
				entries = append(entries, symlink(e.name, link))
			case 3:
				entries = append(entries, hardlink(e.name, e.link))
			}
		}
		tr, err := openTree(root)
		if err != nil {
			t.Fatal(err)
		}
		defer tr.close()
		x := newExtractor(tr, testLogger(t), 1<<20)
		for _, e := range entries { // one layer per entry: links from earlier layers
			var arch []byte
			func() {
				defer func() {
					if recover() != nil {
						arch = nil // names archive/tar cannot write
					}
				}()
				arch = tarOfEntries(&tbQuiet{t}, e)
			}()
			if arch == nil {
				continue
			}
			if err := x.applyLayer(context.Background(), strings.NewReader(string(arch))); err != nil {
				break
			}
		}
		diffSnapshots(t, before, snapshot(t, base, root))
	})
}

// tbQuiet turns Fatal into a panic, for helpers called on inputs the tar
// writer rejects.
type tbQuiet struct{ testing.TB }

func (q *tbQuiet) Fatal(args ...any) { panic("unwritable") }
func (q *tbQuiet) Helper()           {}

func TestDecompressionBomb(t *testing.T) {
	bomb := gz(t, tarOfEntries(t, reg("zeros", strings.Repeat("\x00", 8<<20))))
	tests := []struct {
		name string
		arch []byte
	}{
		{"compressed archive", bomb},
		{"compressed layer", dockerSave(t, imageConfig(), bomb)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			_, err := importBytes(t, s, "bomb", tt.arch, ImportOptions{MaxBytes: 1 << 20})
			wantCode(t, err, sandbox.CodePayloadTooLarge)
			if es := storeEntries(t, s); len(es) != 0 {
				t.Errorf("a failed import left %v", es)
			}
		})
	}
}
