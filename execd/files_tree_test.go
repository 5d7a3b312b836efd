package execd

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// tree creates, under the server's WorkDir:
//
//	t/a.txt  t/b/c.txt  t/b/d/e.txt  t/b/x.md  t/z  t/link -> b  t/.hid.txt
func (fs *fileServer) tree() {
	fs.t.Helper()
	for _, p := range []string{"t/a.txt", "t/b/c.txt", "t/b/d/e.txt", "t/b/x.md", "t/z", "t/.hid.txt"} {
		fs.write(p, p)
	}
	if err := os.Symlink("b", fs.path("t/link")); err != nil {
		fs.t.Fatal(err)
	}
}

func decodeInfos(t *testing.T, b []byte) []wire.FileInfo {
	t.Helper()
	var out []wire.FileInfo
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return out
}

// rels returns the paths of infos relative to root, with a "/" suffix on
// directories and "@" on symbolic links.
func rels(t *testing.T, root string, infos []wire.FileInfo) []string {
	t.Helper()
	out := make([]string, 0, len(infos))
	for _, fi := range infos {
		r, err := filepath.Rel(root, fi.Path)
		if err != nil {
			t.Fatal(err)
		}
		switch fi.Type {
		case "directory":
			r += "/"
		case "symlink":
			r += "@"
		}
		out = append(out, r)
	}
	return out
}

func TestListDir(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.tree()
	root := fs.path("t")
	tests := []struct {
		depth string
		want  []string
	}{
		{"", []string{".hid.txt", "a.txt", "b/", "link@", "z"}},
		{"0", []string{}},
		{"1", []string{".hid.txt", "a.txt", "b/", "link@", "z"}},
		{"2", []string{".hid.txt", "a.txt", "b/", "b/c.txt", "b/d/", "b/x.md", "link@", "z"}},
		{"9", []string{".hid.txt", "a.txt", "b/", "b/c.txt", "b/d/", "b/d/e.txt", "b/x.md", "link@", "z"}},
	}
	for _, tt := range tests {
		q := []string{"path", "t"}
		if tt.depth != "" {
			q = append(q, "depth", tt.depth)
		}
		rec := fs.serve("GET", "/directories/list?"+query(q...), nil, nil)
		wantStatus(t, rec, http.StatusOK)
		if got := rels(t, root, decodeInfos(t, rec.Body.Bytes())); !slices.Equal(got, tt.want) {
			t.Errorf("depth %q: got %v, want %v", tt.depth, got, tt.want)
		}
	}
	bad := []struct {
		q      string
		status int
		code   sandbox.Code
	}{
		{query("path", "t/link"), 400, sandbox.CodeInvalidPath},
		{query("path", "t/a.txt"), 400, sandbox.CodeInvalidPath},
		{query("path", "nope"), 404, sandbox.CodeFileNotFound},
		{query("path", "t", "depth", "-1"), 400, sandbox.CodeInvalidRequest},
		{"", 400, sandbox.CodeMissingQuery},
	}
	for _, tt := range bad {
		wantError(t, fs.serve("GET", "/directories/list?"+tt.q, nil, nil), tt.status, tt.code)
	}
}

func TestSearch(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.tree()
	root := fs.path("t")
	tests := []struct {
		pattern string
		want    []string
	}{
		{"", []string{".hid.txt", "a.txt", "b/c.txt", "b/d/e.txt", "b/x.md", "link@", "z"}},
		{"**", []string{".hid.txt", "a.txt", "b/c.txt", "b/d/e.txt", "b/x.md", "link@", "z"}},
		{"*.txt", []string{".hid.txt", "a.txt", "b/c.txt", "b/d/e.txt"}},
		{"b/*.txt", []string{"b/c.txt"}},
		{"b/**/*.txt", []string{"b/c.txt", "b/d/e.txt"}},
		{"**/d/*", []string{"b/d/e.txt"}},
		{"[a-c].*", []string{"a.txt", "b/c.txt"}},
		{"nothing", []string{}},
	}
	for _, tt := range tests {
		rec := fs.serve("GET", "/files/search?"+query("path", "t", "pattern", tt.pattern), nil, nil)
		wantStatus(t, rec, http.StatusOK)
		if got := rels(t, root, decodeInfos(t, rec.Body.Bytes())); !slices.Equal(got, tt.want) {
			t.Errorf("pattern %q: got %v, want %v", tt.pattern, got, tt.want)
		}
	}
	// A symbolic link as the root is followed; paths keep the link.
	rec := fs.serve("GET", "/files/search?"+query("path", "t/link", "pattern", "*.md"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	if got := decodeInfos(t, rec.Body.Bytes()); len(got) != 1 || got[0].Path != fs.path("t/link/x.md") {
		t.Errorf("search through a root link: %+v", got)
	}
	bad := []struct {
		q      string
		status int
		code   sandbox.Code
	}{
		{query("path", "nope"), 404, sandbox.CodeFileNotFound},
		{query("path", "t/a.txt"), 400, sandbox.CodeInvalidPath},
		{query("path", "t", "pattern", "[x"), 400, sandbox.CodeInvalidRequest},
		{"pattern=*", 400, sandbox.CodeMissingQuery},
	}
	for _, tt := range bad {
		wantError(t, fs.serve("GET", "/files/search?"+tt.q, nil, nil), tt.status, tt.code)
	}
}

func TestMakeDirs(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.write("file", "")
	if err := os.Mkdir(fs.path("existing"), 0o700); err != nil {
		t.Fatal(err)
	}
	rec := fs.serveJSON("POST", "/directories", map[string]wire.Permission{
		"a/b/c":       {Mode: 700},
		fs.path("d"):  {},
		"existing":    {}, // no mode given: left as it is
		"existing/in": {Mode: 1777},
	})
	wantStatus(t, rec, http.StatusOK)
	for p, mode := range map[string]os.FileMode{
		"a/b/c": os.ModeDir | 0o700, "d": os.ModeDir | 0o755, "existing": os.ModeDir | 0o700,
		"existing/in": os.ModeDir | os.ModeSticky | 0o777,
	} {
		fi, err := os.Stat(fs.path(p))
		if err != nil || fi.Mode() != mode {
			t.Errorf("%s: %v, %v; want mode %v", p, fi, err, mode)
		}
	}
	wantError(t, fs.serveJSON("POST", "/directories", map[string]wire.Permission{"file": {}}), http.StatusConflict, sandbox.CodeAlreadyExists)
	wantError(t, fs.serveJSON("POST", "/directories", map[string]wire.Permission{"file/x": {}}), http.StatusBadRequest, sandbox.CodeInvalidPath)
	wantError(t, fs.serveJSON("POST", "/directories", map[string]wire.Permission{"q": {Mode: 78}}), http.StatusBadRequest, sandbox.CodeInvalidRequest)
	wantError(t, fs.serve("POST", "/directories", strings.NewReader("[]"), nil), http.StatusBadRequest, sandbox.CodeInvalidRequest)
}

func TestRemoveDirs(t *testing.T) {
	fs := newFileServer(t, Config{})
	fs.tree()
	rec := fs.serve("DELETE", "/directories?"+query("path", "t/link", "path", "t/b", "path", "missing"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	for _, p := range []string{"t/link", "t/b"} {
		if _, err := os.Lstat(fs.path(p)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if _, err := os.Stat(fs.path("t/a.txt")); err != nil {
		t.Fatal(err)
	}
	wantError(t, fs.serve("DELETE", "/directories?"+query("path", "/"), nil, nil), http.StatusBadRequest, sandbox.CodeInvalidPath)
	wantError(t, fs.serve("DELETE", "/directories?"+query("path", "../../../../../../.."), nil, nil), http.StatusBadRequest, sandbox.CodeInvalidPath)
	wantError(t, fs.serve("DELETE", "/directories", nil, nil), http.StatusBadRequest, sandbox.CodeMissingQuery)
}
