package image

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/zstd"

	"github.com/astrabox/astrabox/sandbox"
)

// baseLayer and topLayer make a two-layer image: /bin/sh, /etc/os-release
// and /etc/motd, then /etc/motd changed and /app/run added.
var (
	baseEntries = []ent{dir("bin"), reg("bin/sh", "#!shell"), dir("etc"), reg("etc/os-release", "ID=test"), reg("etc/motd", "old")}
	topEntries  = []ent{dir("etc"), reg("etc/motd", "new"), dir("app"), reg("app/run", "run")}
)

func checkTwoLayers(t *testing.T, rootfs string) {
	t.Helper()
	for p, want := range map[string]string{"bin/sh": "#!shell", "etc/os-release": "ID=test", "etc/motd": "new", "app/run": "run"} {
		if got := readFile(t, filepath.Join(rootfs, p)); got != want {
			t.Errorf("%s = %q, want %q", p, got, want)
		}
	}
}

func zst(t *testing.T, b []byte) []byte {
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

func TestImportFormats(t *testing.T) {
	rootfs := tarOfEntries(t, append(append([]ent{}, baseEntries...), topEntries[1:]...)...)
	base, top := tarOfEntries(t, baseEntries...), tarOfEntries(t, topEntries...)
	cfg := imageConfig("PATH=/bin", "A=1")
	amd := &ociPlatform{OS: "linux", Architecture: "amd64"}
	arm := &ociPlatform{OS: "linux", Architecture: "arm64"}
	armImg := ociImage{config: []byte(`{"os":"linux","architecture":"arm64"}`), layers: [][]byte{gz(t, tarOfEntries(t, reg("arm", "x")))}, plat: arm}
	oci := ociFiles(t, ociImage{config: cfg, layers: [][]byte{gz(t, base), gz(t, top)}})
	multi := ociFiles(t, armImg, ociImage{config: cfg, layers: [][]byte{gz(t, base), top}, plat: amd})

	tests := []struct {
		name    string
		input   func(t *testing.T, dir string) string // returns the path to import
		format  string
		config  bool
		layers  int
		digests string // expected digest, when known
	}{
		{"rootfs tar", func(t *testing.T, d string) string { return writeFile(t, d, "r.tar", rootfs) }, FormatRootFS, false, 1, "sha256:" + sha(rootfs)},
		{"rootfs tar.gz", func(t *testing.T, d string) string { return writeFile(t, d, "r.tgz", gz(t, rootfs)) }, FormatRootFS, false, 1, "sha256:" + sha(rootfs)},
		{"rootfs tar.zst", func(t *testing.T, d string) string { return writeFile(t, d, "r.zst", zst(t, rootfs)) }, FormatRootFS, false, 1, ""},
		{"docker save", func(t *testing.T, d string) string { return writeFile(t, d, "d.tar", dockerSave(t, cfg, base, top)) }, FormatDocker, true, 2, "sha256:" + sha(cfg)},
		{"docker save gzipped, gzipped layers", func(t *testing.T, d string) string {
			return writeFile(t, d, "d.tgz", gz(t, dockerSave(t, cfg, gz(t, base), gz(t, top))))
		}, FormatDocker, true, 2, ""},
		{"oci layout directory", func(t *testing.T, d string) string { return writeDir(t, filepath.Join(d, "oci"), oci) }, FormatOCI, true, 2, ""},
		{"oci layout tar", func(t *testing.T, d string) string { return writeFile(t, d, "o.tar", tarOf(t, oci)) }, FormatOCI, true, 2, ""},
		{"oci multi-platform tar.gz", func(t *testing.T, d string) string { return writeFile(t, d, "m.tgz", gz(t, tarOf(t, multi))) }, FormatOCI, true, 2, ""},
		{"docker save by go-containerregistry", func(t *testing.T, d string) string {
			p := filepath.Join(d, "ggcr.tar")
			tag, _ := name.NewTag("example.test/ggcr:v1")
			if err := tarball.WriteToFile(p, tag, ggcrImage(t, base, top)); err != nil {
				t.Fatal(err)
			}
			return p
		}, FormatDocker, true, 2, ""},
		{"oci layout by go-containerregistry", func(t *testing.T, d string) string {
			p := filepath.Join(d, "ggcr-layout")
			idx := mutate.AppendManifests(empty.Index,
				mutate.IndexAddendum{Add: ggcrImage(t, tarOfEntries(t, reg("arm", "x"))), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
				mutate.IndexAddendum{Add: ggcrImage(t, base, top), Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
			if _, err := layout.Write(p, idx); err != nil {
				t.Fatal(err)
			}
			return p
		}, FormatOCI, true, 2, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			p := tt.input(t, t.TempDir())
			info, err := s.Import(context.Background(), "img", p, ImportOptions{Platform: "linux/amd64"})
			if err != nil {
				t.Fatal(err)
			}
			if info.Format != tt.format {
				t.Errorf("format %s, want %s", info.Format, tt.format)
			}
			if info.Layers != tt.layers {
				t.Errorf("layers %d, want %d", info.Layers, tt.layers)
			}
			if tt.digests != "" && info.Digest != tt.digests {
				t.Errorf("digest %s, want %s", info.Digest, tt.digests)
			}
			if !strings.HasPrefix(info.Digest, "sha256:") {
				t.Errorf("digest %q", info.Digest)
			}
			if info.Name != "img:latest" || info.Source != p || info.Created.IsZero() {
				t.Errorf("info %+v", info)
			}
			if want := int64(len("#!shell") + len("ID=test") + len("new") + len("run")); info.Size != want {
				t.Errorf("size %d, want %d", info.Size, want)
			}
			dir, err := s.Resolve("img")
			if err != nil || dir != info.RootFS {
				t.Fatalf("Resolve = %q, %v; Info.RootFS %q", dir, err, info.RootFS)
			}
			checkTwoLayers(t, dir)
			if exists(filepath.Join(dir, "arm")) {
				t.Error("the arm64 image was imported")
			}
			if tt.config {
				c := info.Config
				if c == nil || !slices.Equal(c.Env, []string{"PATH=/bin", "A=1"}) || c.WorkingDir != "/work" || c.User != "1000:1000" || !slices.Equal(c.Entrypoint, []string{"/bin/sh"}) {
					t.Errorf("config %+v", c)
				}
				if info.Platform != "linux/amd64" {
					t.Errorf("platform %q", info.Platform)
				}
			} else if info.Config != nil {
				t.Errorf("config %+v from a rootfs tarball", info.Config)
			}
			got, err := s.Get("img:latest")
			if err != nil || got.Digest != info.Digest || got.RootFS != info.RootFS || !got.Created.Equal(info.Created) {
				t.Errorf("Get = %+v, %v", got, err)
			}
			if es := storeEntries(t, s); !slices.Equal(es, []string{"img+latest"}) {
				t.Errorf("store holds %v", es)
			}
		})
	}
}

// ggcrImage builds an image with go-containerregistry from tar layers.
func ggcrImage(t *testing.T, layers ...[]byte) v1.Image {
	t.Helper()
	img := empty.Image
	for _, l := range layers {
		layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(l)), nil })
		if err != nil {
			t.Fatal(err)
		}
		if img, err = mutate.AppendLayers(img, layer); err != nil {
			t.Fatal(err)
		}
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Env = []string{"PATH=/bin", "A=1"}
	cf.Config.Entrypoint = []string{"/bin/sh"}
	cf.Config.WorkingDir = "/work"
	cf.Config.User = "1000:1000"
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestImportKeepsMetadata(t *testing.T) {
	requireRoot(t)
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	s := openStore(t, t.TempDir())
	arch := tarOfEntries(t,
		ent{Name: "./", Type: tar.TypeDir, Mode: 0o755},
		ent{Name: "usr/bin/", Type: tar.TypeDir, Mode: 0o711, UID: 2, GID: 3, ModTime: old},
		ent{Name: "usr/bin/su", Body: "su", Mode: 0o4755},
		ent{Name: "usr/bin/wall", Body: "wall", Mode: 0o2755, GID: 5},
		ent{Name: "tmp/", Type: tar.TypeDir, Mode: 0o1777},
		ent{Name: "home/u/f", Body: "data", Mode: 0o600, UID: 1000, GID: 1001, ModTime: old},
		symlink("usr/bin/sh", "../../bin/bash"),
		ent{Name: "bin/bash", Body: "bash", Mode: 0o755},
		hardlink("bin/rbash", "bin/bash"),
		hardlink("bin/rbash2", "/bin/bash"),
		ent{Name: "dev/null", Type: tar.TypeChar, Mode: 0o666},
		ent{Name: "run/fifo", Type: tar.TypeFifo, Mode: 0o644},
	)
	info, err := importBytes(t, s, "meta", arch, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	root := info.RootFS
	st := func(p string) *syscall.Stat_t {
		var st syscall.Stat_t
		if err := syscall.Lstat(filepath.Join(root, p), &st); err != nil {
			t.Fatal(err)
		}
		return &st
	}
	tests := []struct {
		path     string
		mode     uint32 // permission and special bits
		uid, gid uint32
	}{
		{"usr/bin", 0o711, 2, 3},
		{"usr/bin/su", 0o4755, 0, 0},
		{"usr/bin/wall", 0o2755, 0, 5},
		{"tmp", 0o1777, 0, 0},
		{"home/u/f", 0o600, 1000, 1001},
		{"home", 0o755, 0, 0}, // implicit
	}
	for _, tt := range tests {
		s := st(tt.path)
		if s.Mode&0o7777 != tt.mode || s.Uid != tt.uid || s.Gid != tt.gid {
			t.Errorf("%s: mode %o uid %d gid %d, want %o %d %d", tt.path, s.Mode&0o7777, s.Uid, s.Gid, tt.mode, tt.uid, tt.gid)
		}
	}
	for _, p := range []string{"usr/bin", "home/u/f"} {
		if mt := time.Unix(st(p).Mtim.Unix()); !mt.Equal(old) {
			t.Errorf("%s: mtime %v, want %v", p, mt, old)
		}
	}
	if l, err := os.Readlink(filepath.Join(root, "usr/bin/sh")); err != nil || l != "../../bin/bash" {
		t.Errorf("symlink: %q, %v", l, err)
	}
	if a, b, c := st("bin/bash"), st("bin/rbash"), st("bin/rbash2"); a.Ino != b.Ino || a.Ino != c.Ino || a.Nlink != 3 {
		t.Errorf("hard links: inodes %d %d %d, nlink %d", a.Ino, b.Ino, c.Ino, a.Nlink)
	}
	for _, p := range []string{"dev/null", "run/fifo"} {
		if exists(filepath.Join(root, p)) {
			t.Errorf("%s was created", p)
		}
	}
	if info.Size != int64(len("su")+len("wall")+len("data")+len("bash")) {
		t.Errorf("size %d (hard links count once)", info.Size)
	}
}

func TestWhiteouts(t *testing.T) {
	lower := tarOfEntries(t,
		dir("etc"), reg("etc/a", "a"), reg("etc/b", "b"), dir("etc/gone"), reg("etc/gone/x", "x"),
		dir("opq"), reg("opq/x", "x"), dir("opq/sub"), reg("opq/sub/y", "y"), dir("opq/keep"), reg("opq/keep/old", "old"),
		dir("late"), reg("late/x", "x"),
	)
	upper := tarOfEntries(t,
		reg("etc/.wh.a", ""), reg("etc/.wh.gone", ""), reg("etc/.wh.missing", ""), reg("nodir/.wh.x", ""),
		dir("opq"), reg("opq/.wh..wh..opq", ""), reg("opq/new", "new"), dir("opq/keep"), reg("opq/keep/fresh", "fresh"),
		// The opaque marker after the layer's own entry: that entry stays.
		reg("late/mine", "mine"), reg("late/.wh..wh..opq", ""),
		// AUFS bookkeeping is ignored.
		reg(".wh..wh.plnk/1.2", ""),
	)
	third := tarOfEntries(t, reg("etc/a", "again"))
	cfg := imageConfig()
	for _, format := range []string{"docker", "oci"} {
		t.Run(format, func(t *testing.T) {
			var arch []byte
			if format == "docker" {
				arch = dockerSave(t, cfg, lower, upper)
			} else {
				arch = tarOf(t, ociFiles(t, ociImage{config: cfg, layers: [][]byte{gz(t, lower), upper}}))
			}
			s := openStore(t, t.TempDir())
			info, err := importBytes(t, s, "wh", arch, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			root := info.RootFS
			for _, p := range []string{"etc/b", "opq/new", "opq/keep/fresh", "late/mine"} {
				if !exists(filepath.Join(root, p)) {
					t.Errorf("%s is missing", p)
				}
			}
			for _, p := range []string{"etc/a", "etc/gone", "opq/x", "opq/sub", "opq/keep/old", "late/x", "nodir", ".wh..wh.plnk"} {
				if exists(filepath.Join(root, p)) {
					t.Errorf("%s survived", p)
				}
			}
			var whs []string
			filepath.WalkDir(root, func(p string, d os.DirEntry, _ error) error {
				if strings.HasPrefix(d.Name(), ".wh.") {
					whs = append(whs, p)
				}
				return nil
			})
			if len(whs) > 0 {
				t.Errorf("whiteout files were written: %v", whs)
			}
		})
	}
	t.Run("re-added in a later layer", func(t *testing.T) {
		s := openStore(t, t.TempDir())
		info, err := importBytes(t, s, "wh", dockerSave(t, cfg, lower, upper, third), ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(info.RootFS, "etc/a")); got != "again" {
			t.Errorf("etc/a = %q", got)
		}
	})
}

func TestImmutableAndReplace(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := context.Background()
	v1, err := importBytes(t, s, "app:1", tarOfEntries(t, reg("version", "one")), ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A running box holds its lower layer open, as an overlay mount does.
	held, err := os.Open(v1.RootFS)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	_, err = importBytes(t, s, "app:1", tarOfEntries(t, reg("version", "two")), ImportOptions{})
	wantCode(t, err, sandbox.CodeAlreadyExists)
	if got := readFile(t, filepath.Join(v1.RootFS, "version")); got != "one" {
		t.Fatalf("a refused import changed the image: %q", got)
	}

	v2, err := importBytes(t, s, "app:1", tarOfEntries(t, reg("version", "two")), ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if v2.RootFS != v1.RootFS || v2.Digest == v1.Digest {
		t.Errorf("replaced: %+v, was %+v", v2, v1)
	}
	if got := readFile(t, filepath.Join(v2.RootFS, "version")); got != "two" {
		t.Errorf("after replace: %q", got)
	}
	b, err := os.ReadFile("/proc/self/fd/" + strconv.FormatUint(uint64(held.Fd()), 10) + "/version")
	if err != nil || string(b) != "one" {
		t.Errorf("the old version changed under a running box: %q, %v", b, err)
	}
	// Replace also makes an image that does not exist yet.
	if _, err := importBytes(t, s, "new", tarOfEntries(t, reg("f", "x")), ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx)
	if err != nil || n != 1 {
		t.Errorf("Prune = %d, %v; want 1", n, err)
	}
	if es := storeEntries(t, s); !slices.Equal(es, []string{".retired", "app+1", "new+latest"}) {
		t.Errorf("store holds %v", es)
	}
}

func TestListGetRemove(t *testing.T) {
	s := openStore(t, t.TempDir())
	ctx := context.Background()
	for _, n := range []string{"zeta", "alpha:2", "alpha:1"} {
		if _, err := importBytes(t, s, n, tarOfEntries(t, reg("f", n)), ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, in := range list {
		names = append(names, in.Name)
	}
	if !slices.Equal(names, []string{"host", "alpha:1", "alpha:2", "zeta:latest"}) {
		t.Errorf("List names %v", names)
	}
	if !list[0].BuiltIn || list[0].Format != FormatBuiltIn || list[1].BuiltIn {
		t.Errorf("built-in flags: %+v %+v", list[0], list[1])
	}
	if in, err := s.Get("host"); err != nil || !in.BuiltIn {
		t.Errorf("Get(host) = %+v, %v", in, err)
	}

	tests := []struct {
		name string
		op   func() error
		code sandbox.Code
	}{
		{"remove", func() error { return s.Remove(ctx, "zeta") }, ""},
		{"get removed", func() error { _, err := s.Get("zeta"); return err }, sandbox.CodeImageNotFound},
		{"resolve removed", func() error { _, err := s.Resolve("zeta:latest"); return err }, sandbox.CodeImageNotFound},
		{"remove again", func() error { return s.Remove(ctx, "zeta") }, sandbox.CodeImageNotFound},
		{"remove other tag", func() error { return s.Remove(ctx, "alpha") }, sandbox.CodeImageNotFound},
		{"remove host", func() error { return s.Remove(ctx, "host") }, sandbox.CodeInvalidRequest},
		{"resolve host", func() error { _, err := s.Resolve("host"); return err }, sandbox.CodeInvalidRequest},
		{"get host tag", func() error { _, err := s.Get("host:v2"); return err }, sandbox.CodeImageNotFound},
		{"import host", func() error {
			_, err := importBytes(t, s, "host", tarOfEntries(t, reg("f", "")), ImportOptions{})
			return err
		}, sandbox.CodeInvalidRequest},
		{"import host tag", func() error {
			_, err := importBytes(t, s, "host:x", tarOfEntries(t, reg("f", "")), ImportOptions{})
			return err
		}, sandbox.CodeInvalidRequest},
		{"import bad name", func() error {
			_, err := importBytes(t, s, "../x", tarOfEntries(t, reg("f", "")), ImportOptions{})
			return err
		}, sandbox.CodeInvalidRequest},
		{"import missing file", func() error {
			_, err := s.Import(ctx, "x", filepath.Join(t.TempDir(), "missing"), ImportOptions{})
			return err
		}, sandbox.CodeInvalidRequest},
		{"import non-archive", func() error {
			_, err := importBytes(t, s, "x", []byte("hello, not a tar at all"), ImportOptions{})
			return err
		}, sandbox.CodeInvalidRequest},
		{"import empty", func() error { _, err := importBytes(t, s, "x", nil, ImportOptions{}); return err }, sandbox.CodeInvalidRequest},
		{"import xz", func() error {
			_, err := importBytes(t, s, "x", []byte{0xfd, '7', 'z', 'X', 'Z', 0, 1, 2}, ImportOptions{})
			return err
		}, sandbox.CodeNotSupported},
		{"bad platform", func() error {
			_, err := importBytes(t, s, "x", tarOfEntries(t, reg("f", "")), ImportOptions{Platform: "linux"})
			return err
		}, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		err := tt.op()
		if tt.code == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if sandbox.CodeOf(err) != tt.code {
			t.Errorf("%s: %v, want code %s", tt.name, err, tt.code)
		}
	}
	if es := storeEntries(t, s); !slices.Equal(es, []string{"alpha+1", "alpha+2"}) {
		t.Errorf("store holds %v", es)
	}
}

func TestOCIPlatformSelection(t *testing.T) {
	arm := ociImage{config: []byte(`{"os":"linux","architecture":"arm64"}`), layers: [][]byte{tarOfEntries(t, reg("arch", "arm64"))}, plat: &ociPlatform{OS: "linux", Architecture: "arm64"}}
	amd := ociImage{config: []byte(`{"os":"linux","architecture":"amd64"}`), layers: [][]byte{tarOfEntries(t, reg("arch", "amd64"))}, plat: &ociPlatform{OS: "linux", Architecture: "amd64"}}
	tests := []struct {
		platform string
		imgs     []ociImage
		want     string
		code     sandbox.Code
	}{
		{"linux/amd64", []ociImage{arm, amd}, "amd64", ""},
		{"linux/arm64", []ociImage{arm, amd}, "arm64", ""},
		{"linux/riscv64", []ociImage{arm, amd}, "", sandbox.CodeInvalidRequest},
		{"linux/riscv64", []ociImage{arm}, "arm64", ""}, // the single manifest is taken
	}
	for _, tt := range tests {
		s := openStore(t, t.TempDir())
		info, err := importBytes(t, s, "p", tarOf(t, ociFiles(t, tt.imgs...)), ImportOptions{Platform: tt.platform})
		if tt.code != "" {
			wantCode(t, err, tt.code)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(info.RootFS, "arch")); got != tt.want {
			t.Errorf("%s: got the %s image", tt.platform, got)
		}
	}
}

func TestOCIDigestMismatch(t *testing.T) {
	files := ociFiles(t, ociImage{config: imageConfig(), layers: [][]byte{tarOfEntries(t, reg("f", "good"))}})
	for i := range files {
		if strings.HasPrefix(files[i].name, "blobs/") && bytes.Contains(files[i].data, []byte("good")) {
			files[i].data = tarOfEntries(t, reg("f", "evil"))
		}
	}
	s := openStore(t, t.TempDir())
	_, err := importBytes(t, s, "x", tarOf(t, files), ImportOptions{})
	wantCode(t, err, sandbox.CodeInvalidRequest)
	if !strings.Contains(err.Error(), "digest") {
		t.Errorf("error %v does not name the digest", err)
	}
	if es := storeEntries(t, s); len(es) != 0 {
		t.Errorf("store holds %v after a failed import", es)
	}
}

func TestOpenSweepsAbandonedWork(t *testing.T) {
	d := t.TempDir()
	s := openStore(t, d)
	busy, err := s.newWork()
	if err != nil {
		t.Fatal(err)
	}
	defer s.discard(busy)
	dead := filepath.Join(d, workPrefix+"dead")
	writeDir(t, dead, []file{{"image/rootfs/f", []byte("x")}})
	openStore(t, d)
	if exists(dead) {
		t.Error("abandoned work directory survived Open")
	}
	if !exists(busy.dir) {
		t.Error("Open removed a work directory in use")
	}
}

func TestReplaceKinds(t *testing.T) {
	tests := []struct {
		name         string
		lower, upper []ent
		check        func(t *testing.T, root string)
	}{
		{"file replaces directory", []ent{dir("a/d"), reg("a/d/f", "f"), reg("a/g", "g")}, []ent{reg("a/d", "file")},
			func(t *testing.T, root string) {
				if readFile(t, filepath.Join(root, "a/d")) != "file" || readFile(t, filepath.Join(root, "a/g")) != "g" {
					t.Error("a/d is not the new file")
				}
			}},
		{"directory replaces file", []ent{reg("a/d", "file")}, []ent{dir("a/d"), reg("a/d/f", "f")},
			func(t *testing.T, root string) {
				if readFile(t, filepath.Join(root, "a/d/f")) != "f" {
					t.Error("a/d/f missing")
				}
			}},
		{"symlink replaces directory", []ent{dir("a/d"), reg("a/d/f", "f")}, []ent{symlink("a/d", "/etc")},
			func(t *testing.T, root string) {
				if l, err := os.Readlink(filepath.Join(root, "a/d")); err != nil || l != "/etc" {
					t.Errorf("a/d: %q, %v", l, err)
				}
			}},
		{"hard link replaces file", []ent{reg("a/f", "f"), reg("a/g", "g")}, []ent{hardlink("a/g", "a/f")},
			func(t *testing.T, root string) {
				if readFile(t, filepath.Join(root, "a/g")) != "f" {
					t.Error("a/g is not a link to a/f")
				}
			}},
		{"directory keeps lower entries, takes new mode", []ent{dir("a/d"), reg("a/d/f", "f")}, []ent{{Name: "a/d", Type: tar.TypeDir, Mode: 0o700}, reg("a/d/g", "g")},
			func(t *testing.T, root string) {
				fi, err := os.Stat(filepath.Join(root, "a/d"))
				if err != nil || fi.Mode().Perm() != 0o700 || !exists(filepath.Join(root, "a/d/f")) || !exists(filepath.Join(root, "a/d/g")) {
					t.Errorf("a/d: %v, %v", fi, err)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openStore(t, t.TempDir())
			info, err := importBytes(t, s, "k", dockerSave(t, imageConfig(), tarOfEntries(t, tt.lower...), tarOfEntries(t, tt.upper...)), ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, info.RootFS)
		})
	}
}

// An entry under a directory that an earlier entry of the same layer
// replaced with a file must fail, not land in the removed directory.
func TestEntryUnderReplacedDirectory(t *testing.T) {
	s := openStore(t, t.TempDir())
	_, err := importBytes(t, s, "x", tarOfEntries(t, reg("a/b/x", "x"), reg("a", "file"), reg("a/b/y", "y")), ImportOptions{})
	wantCode(t, err, sandbox.CodeInvalidRequest)
	if !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("error %v", err)
	}
}
