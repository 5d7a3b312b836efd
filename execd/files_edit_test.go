package execd

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/iotest"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func TestReplace(t *testing.T) {
	fs := newFileServer(t, Config{})
	a := fs.write("a.conf", "host=localhost:8080\nother=localhost\n")
	if err := os.Chmod(a, 0o751); err != nil {
		t.Fatal(err)
	}
	b := fs.write("b.txt", "nothing here")
	before, _ := os.Stat(b)
	if err := os.Symlink("a.conf", fs.path("link")); err != nil {
		t.Fatal(err)
	}
	rec := fs.serveJSON("POST", "/files/replace?verbose=true", map[string]wire.ReplaceItem{
		"link":   {Old: "localhost", New: "0.0.0.0"},
		b:        {Old: "absent", New: "x"},
		"a.conf": {Old: "=", New: ": "},
	})
	wantStatus(t, rec, http.StatusOK)
	var got map[string]wire.ReplaceResult
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]wire.ReplaceResult{"link": {ReplacedCount: 2}, b: {ReplacedCount: 0}, "a.conf": {ReplacedCount: 2}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %v, want %v", k, got[k], v)
		}
	}
	checkFile(t, a, "host: 0.0.0.0:8080\nother: 0.0.0.0\n", 0o751)
	if fi, err := os.Lstat(fs.path("link")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("link is no longer a symbolic link: %v, %v", fi, err)
	}
	if after, _ := os.Stat(b); !after.ModTime().Equal(before.ModTime()) {
		t.Errorf("file without occurrences was rewritten")
	}
	noTempFiles(t, fs.dir)

	// Without verbose the body is empty.
	rec = fs.serveJSON("POST", "/files/replace", map[string]wire.ReplaceItem{"a.conf": {Old: "host", New: "h"}})
	wantStatus(t, rec, http.StatusOK)
	if rec.Body.Len() != 0 {
		t.Fatalf("non-verbose body %q", rec.Body.String())
	}

	bad := []struct {
		name   string
		body   any
		status int
		code   sandbox.Code
	}{
		{"empty old", map[string]wire.ReplaceItem{"a.conf": {Old: "", New: "x"}}, 400, sandbox.CodeInvalidRequest},
		{"missing", map[string]wire.ReplaceItem{"nope": {Old: "a", New: "b"}}, 404, sandbox.CodeFileNotFound},
		{"directory", map[string]wire.ReplaceItem{".": {Old: "a", New: "b"}}, 400, sandbox.CodeInvalidPath},
		{"nul", map[string]wire.ReplaceItem{"a\x00": {Old: "a", New: "b"}}, 400, sandbox.CodeInvalidPath},
		{"empty", map[string]wire.ReplaceItem{}, 400, sandbox.CodeInvalidRequest},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.serveJSON("POST", "/files/replace", tt.body), tt.status, tt.code)
		})
	}
}

func TestReplaceStream(t *testing.T) {
	tests := []struct{ in, old, new string }{
		{"aaaa", "aa", "b"},
		{"abcabcab", "abc", ""},
		{"xyz", "xyzw", "q"},
		{"", "a", "b"},
		{"hello world", "o", "0"},
		{"ababab", "bab", "X"},
		{strings.Repeat("ab", 100000), "ba", "-"},
		{strings.Repeat("x", 70000) + "needle" + strings.Repeat("y", 70000), "needle", "pin"},
	}
	for _, tt := range tests {
		want := strings.ReplaceAll(tt.in, tt.old, tt.new)
		wantN := strings.Count(tt.in, tt.old)
		for _, r := range []io.Reader{strings.NewReader(tt.in), iotest.OneByteReader(strings.NewReader(tt.in)), iotest.HalfReader(strings.NewReader(tt.in))} {
			var out bytes.Buffer
			n, err := replaceStream(&out, r, []byte(tt.old), []byte(tt.new))
			if err != nil || n != wantN || out.String() != want {
				t.Fatalf("replaceStream(%.20q, %q, %q) = %d, %v, %.40q; want %d, %.40q", tt.in, tt.old, tt.new, n, err, out.String(), wantN, want)
			}
		}
	}
}

// FuzzReplaceStream checks replaceStream against strings.ReplaceAll with
// reads of every size.
func FuzzReplaceStream(f *testing.F) {
	f.Add("aaaa", "aa", "b", uint8(1))
	f.Add("abcabc", "ca", "", uint8(2))
	f.Fuzz(func(t *testing.T, in, old, new string, step uint8) {
		if old == "" {
			return
		}
		r := &stepReader{s: in, step: int(step%7) + 1}
		var out bytes.Buffer
		n, err := replaceStream(&out, r, []byte(old), []byte(new))
		if err != nil {
			t.Fatal(err)
		}
		if want := strings.ReplaceAll(in, old, new); out.String() != want || n != strings.Count(in, old) {
			t.Fatalf("replaceStream(%q, %q, %q) = %d, %q; want %d, %q", in, old, new, n, out.String(), strings.Count(in, old), want)
		}
	})
}

// stepReader returns at most step bytes per Read.
type stepReader struct {
	s    string
	step int
}

func (r *stepReader) Read(p []byte) (int, error) {
	if r.s == "" {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.s)
	r.s = r.s[n:]
	return n, nil
}

func TestMove(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.write("a.txt", "a")
	fs.write("dir/b.txt", "b")
	fs.write("over.txt", "old")
	if err := os.Mkdir(fs.path("dest"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := fs.serveJSON("POST", "/files/mv", []wire.RenameItem{
		{Src: "a.txt", Dest: "dest/a2.txt"},
		{Src: "dir", Dest: fs.path("dest/dir2")},
		{Src: "dest/a2.txt", Dest: "over.txt"}, // replaces a file
	})
	wantStatus(t, rec, http.StatusOK)
	checkFile(t, fs.path("over.txt"), "a", 0o644)
	checkFile(t, fs.path("dest/dir2/b.txt"), "b", 0o644)
	for _, p := range []string{"a.txt", "dir", "dest/a2.txt"} {
		if _, err := os.Lstat(fs.path(p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	fs.write("full/x", "x")
	bad := []struct {
		name   string
		items  []wire.RenameItem
		status int
		code   sandbox.Code
	}{
		{"missing source", []wire.RenameItem{{Src: "nope", Dest: "x"}}, 404, sandbox.CodeFileNotFound},
		{"missing target directory", []wire.RenameItem{{Src: "over.txt", Dest: "no/such/dir/x"}}, 404, sandbox.CodeFileNotFound},
		{"target parent is a file", []wire.RenameItem{{Src: "dest", Dest: "over.txt/x"}}, 400, sandbox.CodeInvalidPath},
		{"onto a non-empty directory", []wire.RenameItem{{Src: "dest", Dest: "full"}}, 409, sandbox.CodeAlreadyExists},
		{"empty dest", []wire.RenameItem{{Src: "over.txt"}}, 400, sandbox.CodeInvalidRequest},
		{"nul", []wire.RenameItem{{Src: "over.txt", Dest: "a\x00"}}, 400, sandbox.CodeInvalidPath},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.serveJSON("POST", "/files/mv", tt.items), tt.status, tt.code)
		})
	}
	checkFile(t, fs.path("over.txt"), "a", 0o644)
}

func TestMoveAcrossFilesystems(t *testing.T) {
	fs := newFileServer(t, Config{})
	exdev := func(string, string) error { return &os.LinkError{Op: "rename", Err: syscall.EXDEV} }
	f := fs.write("src/f.sh", "#!/bin/sh\n")
	if err := os.Chmod(f, 0o750); err != nil {
		t.Fatal(err)
	}
	fs.write("src/sub/g", "g")
	if err := os.Symlink("f.sh", fs.path("src/link")); err != nil {
		t.Fatal(err)
	}
	if err := moveFile(fs.path("src"), fs.path("moved"), exdev); err != nil {
		t.Fatal(err)
	}
	checkFile(t, fs.path("moved/f.sh"), "#!/bin/sh\n", 0o750)
	checkFile(t, fs.path("moved/sub/g"), "g", 0o644)
	if target, err := os.Readlink(fs.path("moved/link")); err != nil || target != "f.sh" {
		t.Fatalf("link: %q, %v", target, err)
	}
	if _, err := os.Lstat(fs.path("src")); !os.IsNotExist(err) {
		t.Fatalf("source left after the move: %v", err)
	}
	// A single file, replacing one.
	fs.write("one", "1")
	fs.write("two", "2")
	if err := moveFile(fs.path("one"), fs.path("two"), exdev); err != nil {
		t.Fatal(err)
	}
	checkFile(t, fs.path("two"), "1", 0o644)
	// An existing directory as the target is refused, as rename would.
	fs.write("three", "3")
	err := moveFile(fs.path("three"), fs.path("moved"), exdev)
	if sandbox.CodeOf(err) != sandbox.CodeAlreadyExists {
		t.Fatalf("move onto a directory: %v", err)
	}
	checkFile(t, fs.path("three"), "3", 0o644)
	noTempFiles(t, fs.dir)
}
