package execd

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// fileServer is an execd whose WorkDir is a fresh temporary directory.
type fileServer struct {
	t   *testing.T
	h   http.Handler
	dir string
}

func newFileServer(t *testing.T, cfg Config) *fileServer {
	t.Helper()
	if cfg.WorkDir == "" {
		cfg.WorkDir = t.TempDir()
	}
	s := New(cfg)
	t.Cleanup(func() { s.Close() })
	return &fileServer{t: t, h: s.Handler(), dir: cfg.WorkDir}
}

// serve sends one request straight to the handler.
func (fs *fileServer) serve(method, target string, body io.Reader, header http.Header) *httptest.ResponseRecorder {
	fs.t.Helper()
	req := httptest.NewRequest(method, target, body)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	fs.h.ServeHTTP(rec, req)
	return rec
}

// serveJSON sends v as a JSON body.
func (fs *fileServer) serveJSON(method, target string, v any) *httptest.ResponseRecorder {
	fs.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		fs.t.Fatal(err)
	}
	return fs.serve(method, target, bytes.NewReader(b), http.Header{"Content-Type": {"application/json"}})
}

// path is p under the server's WorkDir.
func (fs *fileServer) path(p string) string { return filepath.Join(fs.dir, p) }

// write creates a file under WorkDir with its parents.
func (fs *fileServer) write(p, content string) string {
	fs.t.Helper()
	full := fs.path(p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		fs.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		fs.t.Fatal(err)
	}
	return full
}

func query(kv ...string) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		q.Add(kv[i], kv[i+1])
	}
	return q.Encode()
}

// wantStatus fails unless rec has status.
func wantStatus(t *testing.T, rec *httptest.ResponseRecorder, status int) {
	t.Helper()
	if rec.Code != status {
		t.Fatalf("status %d, want %d; body %s", rec.Code, status, rec.Body.String())
	}
}

// wantError fails unless rec is an error answer with status and code.
func wantError(t *testing.T, rec *httptest.ResponseRecorder, status int, code sandbox.Code) wire.ErrorResponse {
	t.Helper()
	wantStatus(t, rec, status)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("error Content-Type %q, want application/json", ct)
	}
	var er wire.ErrorResponse
	if err := json.Unmarshal(rec.Body.Bytes(), &er); err != nil {
		t.Fatalf("error body %q: %v", rec.Body.String(), err)
	}
	if er.Code != string(code) || er.Message == "" {
		t.Fatalf("error %+v, want code %s with a message", er, code)
	}
	return er
}

// noTempFiles fails if an upload or replace left a temporary file under
// dir.
func noTempFiles(t *testing.T, dir string) {
	t.Helper()
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".astrabox-") {
			t.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
}

func TestResolvePath(t *testing.T) {
	tests := []struct {
		base, p, want string
		code          sandbox.Code
	}{
		{"/work", "a/b.txt", "/work/a/b.txt", ""},
		{"/work", "/etc/x", "/etc/x", ""},
		{"/work", "a/../../etc", "/etc", ""},
		{"/work", "../../../..", "/", ""},
		{"/work", "./a//b/", "/work/a/b", ""},
		{"/work", "/a/./b/../c", "/a/c", ""},
		{"rel", "x", "/rel/x", ""},
		{"", "x", "/x", ""},
		{"/work", "", "", sandbox.CodeInvalidPath},
		{"/work", "a\x00b", "", sandbox.CodeInvalidPath},
		{"/work", "/a\x00", "", sandbox.CodeInvalidPath},
	}
	for _, tt := range tests {
		got, err := resolvePath(tt.base, tt.p)
		if tt.code != "" {
			if sandbox.CodeOf(err) != tt.code {
				t.Errorf("resolvePath(%q, %q) error %v, want %s", tt.base, tt.p, err, tt.code)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("resolvePath(%q, %q) = %q, %v; want %q", tt.base, tt.p, got, err, tt.want)
		}
	}
}

// FuzzResolvePath checks that path resolution never panics and always
// yields a clean absolute path without NUL, or an INVALID_PATH error.
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"a", "/a/../b", "../../x", "", "a\x00b", "./", "//x//y/", "..", "~/x", "a/\xff/b"} {
		f.Add("/work", s)
		f.Add("", s)
	}
	f.Fuzz(func(t *testing.T, base, p string) {
		got, err := resolvePath(base, p)
		if err != nil {
			if sandbox.CodeOf(err) != sandbox.CodeInvalidPath {
				t.Fatalf("resolvePath(%q, %q): error %v has code %s", base, p, err, sandbox.CodeOf(err))
			}
			if p != "" && !strings.Contains(p, "\x00") && !strings.Contains(base, "\x00") {
				t.Fatalf("resolvePath(%q, %q) refused a valid path: %v", base, p, err)
			}
			return
		}
		if strings.Contains(p, "\x00") {
			t.Fatalf("resolvePath(%q, %q) accepted a NUL byte", base, p)
		}
		if !filepath.IsAbs(got) || filepath.Clean(got) != got || strings.Contains(got, "\x00") {
			t.Fatalf("resolvePath(%q, %q) = %q, not a clean absolute path", base, p, got)
		}
		if filepath.IsAbs(p) && got != filepath.Clean(p) {
			t.Fatalf("resolvePath(%q, %q) = %q, want the cleaned absolute path", base, p, got)
		}
	})
}

func TestFileInfo(t *testing.T) {
	fs := newFileServer(t, Config{})
	file := fs.write("d/f.txt", "hello")
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f.txt", fs.path("d/link")); err != nil {
		t.Fatal(err)
	}
	rec := fs.serve("GET", "/files/info?"+query("path", "d/f.txt", "path", fs.path("d"), "path", "d/link"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	var got map[string]wire.FileInfo
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		path, typ string
		mode      int
		size      int64
	}{
		"d/f.txt":    {file, "file", 640, 5},
		fs.path("d"): {fs.path("d"), "directory", 755, -1},
		"d/link":     {fs.path("d/link"), "symlink", 777, 5},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d: %+v", len(got), len(want), got)
	}
	for key, w := range want {
		fi, ok := got[key]
		if !ok {
			t.Fatalf("no entry for %q in %+v", key, got)
		}
		if fi.Path != w.path || fi.Type != w.typ || fi.Mode != w.mode || (w.size >= 0 && fi.Size != w.size) {
			t.Errorf("%s: got %+v, want path %s type %s mode %d size %d", key, fi, w.path, w.typ, w.mode, w.size)
		}
		if fi.Owner == "" || fi.Group == "" || fi.ModifiedAt.IsZero() || fi.CreatedAt.IsZero() {
			t.Errorf("%s: owner, group or times missing: %+v", key, fi)
		}
	}

	wantError(t, fs.serve("GET", "/files/info?"+query("path", "d/f.txt", "path", "nope"), nil, nil), http.StatusNotFound, sandbox.CodeFileNotFound)
	wantError(t, fs.serve("GET", "/files/info", nil, nil), http.StatusBadRequest, sandbox.CodeMissingQuery)
	wantError(t, fs.serve("GET", "/files/info?"+query("path", "a\x00b"), nil, nil), http.StatusBadRequest, sandbox.CodeInvalidPath)
	wantError(t, fs.serve("GET", "/files/info?"+query("path", "d/f.txt/x"), nil, nil), http.StatusBadRequest, sandbox.CodeInvalidPath)
}

func TestParseMode(t *testing.T) {
	tests := []struct {
		in   int
		want os.FileMode
		ok   bool
	}{
		{755, 0o755, true},
		{644, 0o644, true},
		{0, 0, true},
		{7, 0o7, true},
		{4755, 0o755 | os.ModeSetuid, true},
		{2770, 0o770 | os.ModeSetgid, true},
		{1777, 0o777 | os.ModeSticky, true},
		{7777, 0o777 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky, true},
		{8, 0, false},
		{759, 0, false},
		{-1, 0, false},
		{17777, 0, false},
		{0o755, 0, false}, // 493: the caller sent the octal value, not its digits
	}
	for _, tt := range tests {
		got, err := parseMode(tt.in, sandbox.CodeInvalidRequest)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseMode(%d) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
			continue
		}
		if tt.ok && modeDigits(got) != tt.in {
			t.Errorf("modeDigits(parseMode(%d)) = %d", tt.in, modeDigits(got))
		}
	}
}

func TestChmod(t *testing.T) {
	fs := newFileServer(t, Config{})
	f := fs.write("a.sh", "#!/bin/sh\n")
	rec := fs.serveJSON("POST", "/files/permissions", map[string]wire.Permission{"a.sh": {Mode: 750}})
	wantStatus(t, rec, http.StatusOK)
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v, want 0750", fi.Mode())
	}
	// Mode 0 leaves the mode; the own uid as owner is always allowed.
	rec = fs.serveJSON("POST", "/files/permissions", map[string]wire.Permission{f: {Owner: strconv.Itoa(os.Getuid())}})
	wantStatus(t, rec, http.StatusOK)
	if fi, _ := os.Stat(f); fi.Mode().Perm() != 0o750 {
		t.Fatalf("mode %v changed by a mode-less request", fi.Mode())
	}
	tests := []struct {
		name   string
		body   any
		status int
		code   sandbox.Code
	}{
		{"missing file", map[string]wire.Permission{"nope": {Mode: 644}}, 404, sandbox.CodeFileNotFound},
		{"bad mode", map[string]wire.Permission{"a.sh": {Mode: 999}}, 400, sandbox.CodeInvalidRequest},
		{"unknown user", map[string]wire.Permission{"a.sh": {Owner: "no-such-user-astrabox"}}, 400, sandbox.CodeInvalidRequest},
		{"unknown group", map[string]wire.Permission{"a.sh": {Group: "no-such-group-astrabox"}}, 400, sandbox.CodeInvalidRequest},
		{"nul", map[string]wire.Permission{"a\x00": {Mode: 644}}, 400, sandbox.CodeInvalidPath},
		{"empty", map[string]wire.Permission{}, 400, sandbox.CodeInvalidRequest},
		{"not an object", []int{1}, 400, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantError(t, fs.serveJSON("POST", "/files/permissions", tt.body), tt.status, tt.code)
		})
	}
}

func TestRemoveFiles(t *testing.T) {
	fs := newFileServer(t, Config{})
	a := fs.write("a.txt", "a")
	b := fs.write("sub/b.txt", "b")
	if err := os.Symlink(fs.path("sub"), fs.path("link")); err != nil {
		t.Fatal(err)
	}
	// A directory among the paths refuses the whole request.
	rec := fs.serve("DELETE", "/files?"+query("path", "a.txt", "path", "sub"), nil, nil)
	wantError(t, rec, http.StatusBadRequest, sandbox.CodeInvalidPath)
	if _, err := os.Stat(a); err != nil {
		t.Fatalf("a.txt removed by a refused request: %v", err)
	}
	rec = fs.serve("DELETE", "/files?"+query("path", "a.txt", "path", "sub/b.txt", "path", "missing", "path", "link"), nil, nil)
	wantStatus(t, rec, http.StatusOK)
	for _, p := range []string{a, b, fs.path("link")} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if _, err := os.Stat(fs.path("sub")); err != nil {
		t.Fatalf("link target removed: %v", err)
	}
	wantError(t, fs.serve("DELETE", "/files", nil, nil), http.StatusBadRequest, sandbox.CodeMissingQuery)
}
