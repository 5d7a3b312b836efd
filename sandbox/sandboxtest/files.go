package sandboxtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// largeFileSize is the size of the file streamed up and down; -short
// uses a smaller one.
const largeFileSize = 1 << 30

// testFiles drives the /files and /directories API of one box. Every
// subtest works in a directory of its own, relative to the box's working
// directory.
func testFiles(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)
	c := b.Client

	t.Run("BinaryRoundTrip", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		data := make([]byte, 256*67+13)
		for i := range data {
			data[i] = byte(i)
		}
		if err := c.WriteFile(ctx, "bin/all-bytes", data, 0); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadFile(ctx, "bin/all-bytes")
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes that differ from the %d written", len(got), len(data))
		}
		infos, err := c.Info(ctx, "bin/all-bytes")
		if fi := infos["bin/all-bytes"]; err != nil || fi.Type != "file" || fi.Size != int64(len(data)) || fi.Mode != 644 {
			t.Fatalf("info %+v, %v; want a file of %d bytes, mode 644", fi, err, len(data))
		}
	})

	t.Run("MultipartUpload", func(t *testing.T) {
		// The OpenSandbox SDKs' form: metadata part, then file part.
		ctx := ctxFor(t, time.Minute)
		data := bytes.Repeat([]byte("multipart\x00\xff"), 50000)
		sum := sha256.Sum256(data)
		size := int64(len(data))
		if err := c.UploadMultipart(ctx, "mp/file.bin", bytes.NewReader(data), client.UploadOptions{Mode: 600, Size: &size, SHA256: hex.EncodeToString(sum[:])}); err != nil {
			t.Fatal(err)
		}
		got, err := c.ReadFile(ctx, "mp/file.bin")
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes (want %d): %v", len(got), len(data), err)
		}
		bad := hex.EncodeToString(make([]byte, 32))
		err = c.UploadMultipart(ctx, "mp/bad.bin", bytes.NewReader(data), client.UploadOptions{SHA256: bad})
		wantCode(t, err, sandbox.CodeUploadVerification)
	})

	t.Run("LargeFile", func(t *testing.T) {
		size := int64(largeFileSize)
		if testing.Short() {
			size = 64 << 20
		}
		ctx := ctxFor(t, 15*time.Minute)
		const seed = 20240611
		want := hashStream(t, seededBytes(seed, size))
		// Upload, hashing what is sent; execd verifies size and SHA-256.
		sent := sha256.New()
		err := c.Upload(ctx, "large/blob", io.TeeReader(seededBytes(seed, size), sent),
			client.UploadOptions{Size: &size, SHA256: hex.EncodeToString(want)})
		if err != nil {
			t.Fatalf("upload %d bytes: %v", size, err)
		}
		if !bytes.Equal(sent.Sum(nil), want) {
			t.Fatal("the generator is not deterministic")
		}
		t.Cleanup(func() { _ = c.RemoveFiles(context.Background(), "large/blob") })
		body, err := c.Download(ctx, "large/blob", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := sha256.New()
		n, err := io.Copy(got, body)
		body.Close()
		if err != nil || n != size {
			t.Fatalf("downloaded %d of %d bytes: %v", n, size, err)
		}
		if !bytes.Equal(got.Sum(nil), want) {
			t.Fatal("downloaded bytes differ from the uploaded ones")
		}
	})

	t.Run("Permissions", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.Upload(ctx, "perm/run.sh", strings.NewReader("#!/bin/sh\n"), client.UploadOptions{Mode: 755}); err != nil {
			t.Fatal(err)
		}
		wantMode(t, c, "perm/run.sh", 755)
		for _, mode := range []int{600, 640, 700, 444, 4755} {
			if err := c.Chmod(ctx, map[string]wire.Permission{"perm/run.sh": {Mode: mode}}); err != nil {
				t.Fatalf("chmod %d: %v", mode, err)
			}
			wantMode(t, c, "perm/run.sh", mode)
		}
		wantCode(t, c.Chmod(ctx, map[string]wire.Permission{"perm/run.sh": {Mode: 800}}), sandbox.CodeInvalidRequest)
		wantCode(t, c.Chmod(ctx, map[string]wire.Permission{"perm/nope": {Mode: 644}}), sandbox.CodeFileNotFound)
	})

	t.Run("Owner", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.WriteFile(ctx, "owner/f", []byte("x"), 0); err != nil {
			t.Fatal(err)
		}
		id := strings.Fields(mustRun(t, b, "id -u; id -un; id -un 65534 2>/dev/null || echo 65534"))
		if len(id) != 3 {
			t.Fatalf("id printed %q", id)
		}
		if id[0] != "0" {
			// Not root: files belong to the box's user.
			if fi := info(t, c, "owner/f"); fi.Owner != id[1] {
				t.Fatalf("owner %q, want the box user %q", fi.Owner, id[1])
			}
			return
		}
		if err := c.Chmod(ctx, map[string]wire.Permission{"owner/f": {Owner: "65534"}}); err != nil {
			t.Fatal(err)
		}
		if fi := info(t, c, "owner/f"); fi.Owner != id[2] {
			t.Fatalf("owner %q after chown to 65534, want %q", fi.Owner, id[2])
		}
		wantCode(t, c.Chmod(ctx, map[string]wire.Permission{"owner/f": {Owner: "no-such-user-astrabox"}}), sandbox.CodeInvalidRequest)
	})

	t.Run("RangedDownload", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		data := make([]byte, 1000)
		for i := range data {
			data[i] = byte(i * 7)
		}
		if err := c.WriteFile(ctx, "range/f", data, 0); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name           string
			offset, length int64
			want           []byte
		}{
			{"whole", 0, 0, data},
			{"middle", 10, 20, data[10:30]},
			{"from offset to end", 990, 0, data[990:]},
			{"clamped at end", 900, 5000, data[900:]},
			{"last byte", 999, 1, data[999:]},
			{"suffix", -15, 0, data[985:]},
			{"suffix longer than file", -5000, 0, data},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if got := download(t, c, "range/f", tt.offset, tt.length); !bytes.Equal(got, tt.want) {
					t.Fatalf("got %d bytes, want %d (offset %d length %d)", len(got), len(tt.want), tt.offset, tt.length)
				}
			})
		}
		_, err := c.Download(ctx, "range/f", 1000, 0)
		wantCode(t, err, sandbox.CodeRangeNotSatisfiable)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusRequestedRangeNotSatisfiable {
			t.Fatalf("range past the end: %v, want HTTP 416", err)
		}
	})

	t.Run("Lines", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.WriteFile(ctx, "lines/f.txt", []byte("l1\nl2\nl3\nl4\nl5"), 0); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			first, limit int64
			want         string
		}{
			{1, 0, "l1\nl2\nl3\nl4\nl5"},
			{2, 2, "l2\nl3\n"},
			{5, 1, "l5"},
			{4, 0, "l4\nl5"},
			{9, 0, ""},
		}
		for _, tt := range tests {
			body, err := c.DownloadLines(ctx, "lines/f.txt", tt.first, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(body)
			body.Close()
			if err != nil || string(got) != tt.want {
				t.Errorf("lines %d+%d: %q, %v; want %q", tt.first, tt.limit, got, err, tt.want)
			}
		}
	})

	t.Run("Search", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		for _, p := range []string{"search/a.txt", "search/b.md", "search/sub/c.txt", "search/sub/deep/d.txt", "search/sub/e.go"} {
			if err := c.WriteFile(ctx, p, []byte(p), 0); err != nil {
				t.Fatal(err)
			}
		}
		root := info(t, c, "search").Path
		tests := []struct {
			pattern string
			want    []string
		}{
			{"", []string{"a.txt", "b.md", "sub/c.txt", "sub/deep/d.txt", "sub/e.go"}},
			{"**", []string{"a.txt", "b.md", "sub/c.txt", "sub/deep/d.txt", "sub/e.go"}},
			{"*.txt", []string{"a.txt", "sub/c.txt", "sub/deep/d.txt"}},
			{"sub/**/*.txt", []string{"sub/c.txt", "sub/deep/d.txt"}},
			{"*.rs", []string{}},
		}
		for _, tt := range tests {
			found, err := c.Search(ctx, "search", tt.pattern)
			if err != nil {
				t.Fatalf("search %q: %v", tt.pattern, err)
			}
			if got := relPaths(t, root, found); !slices.Equal(got, tt.want) {
				t.Errorf("search %q: got %v, want %v", tt.pattern, got, tt.want)
			}
		}
		_, err := c.Search(ctx, "search/missing", "**")
		wantCode(t, err, sandbox.CodeFileNotFound)
	})

	t.Run("Replace", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.Upload(ctx, "replace/conf", strings.NewReader("a=localhost\nb=localhost\nc=remote\n"), client.UploadOptions{Mode: 640}); err != nil {
			t.Fatal(err)
		}
		if err := c.WriteFile(ctx, "replace/other", []byte("nothing"), 0); err != nil {
			t.Fatal(err)
		}
		res, err := c.Replace(ctx, map[string]wire.ReplaceItem{
			"replace/conf":  {Old: "localhost", New: "0.0.0.0"},
			"replace/other": {Old: "absent", New: "x"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res["replace/conf"].ReplacedCount != 2 || res["replace/other"].ReplacedCount != 0 || len(res) != 2 {
			t.Fatalf("counts %+v, want conf 2 and other 0", res)
		}
		if got := readFile(t, c, "replace/conf"); got != "a=0.0.0.0\nb=0.0.0.0\nc=remote\n" {
			t.Fatalf("content after replace %q", got)
		}
		wantMode(t, c, "replace/conf", 640)
		_, err = c.Replace(ctx, map[string]wire.ReplaceItem{"replace/conf": {Old: "", New: "x"}})
		wantCode(t, err, sandbox.CodeInvalidRequest)
	})

	t.Run("Move", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.WriteFile(ctx, "move/a", []byte("moved"), 0); err != nil {
			t.Fatal(err)
		}
		if err := c.MakeDirs(ctx, map[string]wire.Permission{"move/into": {}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Move(ctx, wire.RenameItem{Src: "move/a", Dest: "move/into/b"}); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, c, "move/into/b"); got != "moved" {
			t.Fatalf("moved file holds %q", got)
		}
		_, err := c.Info(ctx, "move/a")
		wantCode(t, err, sandbox.CodeFileNotFound)
		wantCode(t, c.Move(ctx, wire.RenameItem{Src: "move/into/b", Dest: "move/none/b"}), sandbox.CodeFileNotFound)
		wantCode(t, c.Move(ctx, wire.RenameItem{Src: "move/none", Dest: "move/x"}), sandbox.CodeFileNotFound)
	})

	t.Run("Delete", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		for _, p := range []string{"del/f1", "del/f2", "del/dir/f3"} {
			if err := c.WriteFile(ctx, p, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		wantCode(t, c.RemoveFiles(ctx, "del/f1", "del/dir"), sandbox.CodeInvalidPath)
		info(t, c, "del/f1") // a refused request deletes nothing
		if err := c.RemoveFiles(ctx, "del/f1", "del/f2", "del/never-existed"); err != nil {
			t.Fatal(err)
		}
		_, err := c.Info(ctx, "del/f1")
		wantCode(t, err, sandbox.CodeFileNotFound)
		if err := c.RemoveDirs(ctx, "del/dir", "del/never-existed"); err != nil {
			t.Fatal(err)
		}
		_, err = c.Info(ctx, "del/dir")
		wantCode(t, err, sandbox.CodeFileNotFound)
		info(t, c, "del")
	})

	t.Run("MakeDirs", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		if err := c.MakeDirs(ctx, map[string]wire.Permission{"mkdir/a/b/c": {Mode: 700}, "mkdir/d": {}}); err != nil {
			t.Fatal(err)
		}
		for p, mode := range map[string]int{"mkdir/a/b/c": 700, "mkdir/d": 755, "mkdir/a": 755} {
			if fi := info(t, c, p); fi.Type != "directory" || fi.Mode != mode {
				t.Errorf("%s: %+v, want a directory with mode %d", p, fi, mode)
			}
		}
		if err := c.MakeDirs(ctx, map[string]wire.Permission{"mkdir/a/b/c": {Mode: 700}}); err != nil {
			t.Fatalf("mkdir -p of an existing directory: %v", err)
		}
	})

	t.Run("List", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		for _, p := range []string{"list/b/x", "list/b/y/z", "list/a", "list/target/hidden"} {
			if err := c.WriteFile(ctx, p, nil, 0); err != nil {
				t.Fatal(err)
			}
		}
		mustRun(t, b, "ln -s target list/link")
		root := info(t, c, "list").Path
		tests := []struct {
			depth int
			want  []string
		}{
			{1, []string{"a", "b/", "link@", "target/"}},
			{2, []string{"a", "b/", "b/x", "b/y/", "link@", "target/", "target/hidden"}},
			{3, []string{"a", "b/", "b/x", "b/y/", "b/y/z", "link@", "target/", "target/hidden"}},
			{0, []string{}},
		}
		for _, tt := range tests {
			entries, err := c.ListDir(ctx, "list", tt.depth)
			if err != nil {
				t.Fatal(err)
			}
			if got := relPaths(t, root, entries); !slices.Equal(got, tt.want) {
				t.Errorf("depth %d: got %v, want %v", tt.depth, got, tt.want)
			}
		}
		_, err := c.ListDir(ctx, "list/link", 1)
		wantCode(t, err, sandbox.CodeInvalidPath)
		_, err = c.ListDir(ctx, "list/missing", 1)
		wantCode(t, err, sandbox.CodeFileNotFound)
	})

	t.Run("BadInput", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		_, err := c.Info(ctx, "bad/missing")
		wantCode(t, err, sandbox.CodeFileNotFound)
		_, err = c.Download(ctx, "bad/missing", 0, 0)
		wantCode(t, err, sandbox.CodeFileNotFound)
		_, err = c.Info(ctx, "bad/nul\x00name")
		wantCode(t, err, sandbox.CodeInvalidPath)
		wantCode(t, c.WriteFile(ctx, "bad/nul\x00name", []byte("x"), 0), sandbox.CodeInvalidPath)

		wrong := sha256.Sum256([]byte("something else"))
		err = c.Upload(ctx, "bad/unverified", strings.NewReader("content"), client.UploadOptions{SHA256: hex.EncodeToString(wrong[:])})
		wantCode(t, err, sandbox.CodeUploadVerification)
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusUnprocessableEntity {
			t.Fatalf("wrong sha256: %v, want HTTP 422", err)
		}
		_, err = c.Info(ctx, "bad/unverified")
		wantCode(t, err, sandbox.CodeFileNotFound)

		if err := c.MakeDirs(ctx, map[string]wire.Permission{"bad/dir": {}}); err != nil {
			t.Fatal(err)
		}
		_, err = c.Download(ctx, "bad/dir", 0, 0)
		wantCode(t, err, sandbox.CodeInvalidPath)
	})
}

// seededBytes is a reproducible stream of n pseudo-random bytes.
func seededBytes(seed uint64, n int64) io.Reader {
	var key [32]byte
	for i := range 4 {
		key[i*8] = byte(seed >> (8 * i))
	}
	return io.LimitReader(rand.NewChaCha8(key), n)
}

// hashStream returns the SHA-256 of r.
func hashStream(t *testing.T, r io.Reader) []byte {
	t.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return h.Sum(nil)
}

// info returns the FileInfo of p and fails the test on an error.
func info(t *testing.T, c *client.Client, p string) wire.FileInfo {
	t.Helper()
	infos, err := c.Info(ctxFor(t, time.Minute), p)
	if err != nil {
		t.Fatalf("info %s: %v", p, err)
	}
	return infos[p]
}

func wantMode(t *testing.T, c *client.Client, p string, mode int) {
	t.Helper()
	if fi := info(t, c, p); fi.Mode != mode {
		t.Fatalf("%s has mode %d, want %d", p, fi.Mode, mode)
	}
}

func readFile(t *testing.T, c *client.Client, p string) string {
	t.Helper()
	b, err := c.ReadFile(ctxFor(t, time.Minute), p)
	if err != nil {
		t.Fatalf("read %s: %v", p, err)
	}
	return string(b)
}

func download(t *testing.T, c *client.Client, p string, offset, length int64) []byte {
	t.Helper()
	body, err := c.Download(ctxFor(t, time.Minute), p, offset, length)
	if err != nil {
		t.Fatalf("download %s at %d+%d: %v", p, offset, length, err)
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatalf("download %s: %v", p, err)
	}
	return b
}

// relPaths returns the paths of infos relative to root, with "/" after
// directories and "@" after symbolic links.
func relPaths(t *testing.T, root string, infos []wire.FileInfo) []string {
	t.Helper()
	out := make([]string, 0, len(infos))
	for _, fi := range infos {
		rel, ok := strings.CutPrefix(fi.Path, root+"/")
		if !ok || path.IsAbs(rel) {
			t.Fatalf("%s is not under %s", fi.Path, root)
		}
		switch fi.Type {
		case "directory":
			rel += "/"
		case "symlink":
			rel += "@"
		}
		out = append(out, rel)
	}
	return out
}
