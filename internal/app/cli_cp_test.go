package app

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server/servertest"
)

// writeTree makes files (path → content; a name ending in "/" is a
// directory) under dir with the given modes.
func writeTree(t *testing.T, dir string, files map[string]string, modes map[string]fs.FileMode) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range modes {
		if err := os.Chmod(filepath.Join(dir, name), mode); err != nil {
			t.Fatal(err)
		}
	}
}

// checkTree fails unless dir holds exactly the regular files of want with
// their contents, and the modes of modes.
func checkTree(t *testing.T, dir string, want map[string]string, modes map[string]fs.FileMode) {
	t.Helper()
	got := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		got[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range want {
		if strings.HasSuffix(name, "/") {
			continue
		}
		if got[name] != content {
			t.Errorf("%s holds %q, want %q", name, got[name], content)
		}
		delete(got, name)
	}
	if len(got) > 0 {
		t.Errorf("unexpected files in %s: %v", dir, got)
	}
	for name, mode := range modes {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
}

// TestCpDirectories: cp copies directory trees in and out of a box,
// keeping modes; a destination that is an existing directory or ends in
// "/" gets the source's base name; symbolic links inside a tree are named
// and left out, and the copy then fails.
func TestCpDirectories(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	var sb struct {
		ID string `json:"id"`
	}
	env.Must(202, "POST", "/v1/sandboxes", map[string]any{"timeout": 600, "entrypoint": []string{"sleep", "infinity"}}, &sb)
	box := "/tmp/astrabox-cpdir-test-" + sb.ID
	if r := runCLI(t, env, "", "exec", sb.ID, "--", "mkdir", "-p", box+"/into"); r.code != 0 {
		t.Fatalf("setup: %d %s", r.code, r.stderr)
	}
	t.Cleanup(func() { _ = os.RemoveAll(box) })

	local := t.TempDir()
	files := map[string]string{"a.txt": "alpha", "sub/b.sh": "#!/bin/sh\n", "sub/deeper/c": "gamma", "empty/": ""}
	modes := map[string]fs.FileMode{"sub/b.sh": 0o750, "sub/deeper": 0o705}
	src := filepath.Join(local, "proj")
	writeTree(t, src, files, modes)
	single := filepath.Join(local, "single.txt")
	if err := os.WriteFile(single, []byte("one file"), 0o600); err != nil {
		t.Fatal(err)
	}

	steps := []struct {
		name string
		args []string
		// check is the file in the box cat shows after the step.
		check, want string
	}{
		{"a directory into a directory named with a slash", []string{"cp", src, sb.ID + ":" + box + "/into/"}, box + "/into/proj/sub/deeper/c", "gamma"},
		{"a directory to a new name", []string{"cp", src, sb.ID + ":" + box + "/renamed"}, box + "/renamed/a.txt", "alpha"},
		{"a file into an existing directory, no slash", []string{"cp", single, sb.ID + ":" + box + "/into"}, box + "/into/single.txt", "one file"},
		{"a file into a directory named with a slash", []string{"cp", single, sb.ID + ":" + box + "/renamed/sub/"}, box + "/renamed/sub/single.txt", "one file"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if r := runCLI(t, env, "", st.args...); r.code != 0 {
				t.Fatalf("exit %d\n%s", r.code, r.stderr)
			}
			if r := runCLI(t, env, "", "exec", sb.ID, "--", "cat", st.check); r.code != 0 || r.stdout != st.want {
				t.Fatalf("cat %s: exit %d, %q, want %q (%s)", st.check, r.code, r.stdout, st.want, r.stderr)
			}
		})
	}

	t.Run("out to a new name and into an existing directory", func(t *testing.T) {
		out := filepath.Join(local, "out")
		if r := runCLI(t, env, "", "cp", sb.ID+":"+box+"/into/proj", out); r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		checkTree(t, out, files, modes)
		if r := runCLI(t, env, "", "cp", sb.ID+":"+box+"/into/proj", out); r.code != 0 {
			t.Fatalf("into an existing directory: exit %d\n%s", r.code, r.stderr)
		}
		checkTree(t, filepath.Join(out, "proj"), files, modes)
		if r := runCLI(t, env, "", "cp", sb.ID+":"+box+"/into/single.txt", out+"/"); r.code != 0 {
			t.Fatalf("a file into a directory: exit %d\n%s", r.code, r.stderr)
		}
		if b, err := os.ReadFile(filepath.Join(out, "single.txt")); err != nil || string(b) != "one file" {
			t.Fatalf("single.txt: %q %v", b, err)
		}
	})

	t.Run("symbolic links are named and left out", func(t *testing.T) {
		withLink := filepath.Join(local, "linked")
		writeTree(t, withLink, map[string]string{"kept": "k"}, nil)
		if err := os.Symlink("../single.txt", filepath.Join(withLink, "escape")); err != nil {
			t.Fatal(err)
		}
		r := runCLI(t, env, "", "cp", withLink, sb.ID+":"+box+"/")
		if r.code == 0 || !strings.Contains(r.stderr, "escape -> ../single.txt (symbolic link)") || !strings.Contains(r.stderr, "1 entries not copied") {
			t.Fatalf("exit %d, stderr %q; want the link named and a failure", r.code, r.stderr)
		}
		if r := runCLI(t, env, "", "exec", sb.ID, "--", "ls", box+"/linked"); r.code != 0 || strings.TrimSpace(r.stdout) != "kept" {
			t.Fatalf("the box's copy holds %q (%s), want only kept", r.stdout, r.stderr)
		}
	})

	t.Run("a directory to standard output or from standard input into a directory", func(t *testing.T) {
		if r := runCLI(t, env, "", "cp", sb.ID+":"+box+"/into", "-"); r.code == 0 || !strings.Contains(r.stderr, "not a regular file") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		if r := runCLI(t, env, "x", "cp", "-", sb.ID+":"+box+"/"); r.code == 0 || !strings.Contains(r.stderr, "standard input has no name") {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
	})
}

// fakeExecd answers execd's file info, listing and download requests from
// a made-up box whose listing of /d is list (untrusted names).
func fakeExecd(t *testing.T, list []wire.FileInfo, files map[string]string) *execdclient.Client {
	t.Helper()
	info := func(p string) (wire.FileInfo, bool) {
		if p == "/d" {
			return wire.FileInfo{Path: p, Type: "directory", Mode: 755}, true
		}
		if c, ok := files[p]; ok {
			return wire.FileInfo{Path: p, Type: "file", Size: int64(len(c)), Mode: 644}, true
		}
		return wire.FileInfo{}, false
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Query().Get("path")
		switch r.URL.Path {
		case "/files/info":
			fi, ok := info(p)
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				_ = json.NewEncoder(w).Encode(wire.ErrorResponse{Code: "FILE_NOT_FOUND", Message: p})
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]wire.FileInfo{p: fi})
		case "/directories/list":
			if p != "/d" {
				_ = json.NewEncoder(w).Encode([]wire.FileInfo{})
				return
			}
			_ = json.NewEncoder(w).Encode(list)
		case "/files/download":
			_, _ = io.WriteString(w, files[p])
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return execdclient.New(srv.URL)
}

// TestCpOutRefusesUntrustedNames: names a box lists are never trusted: a
// name that is not one plain element fails the copy, and nothing is
// written outside the destination, not even through a symbolic link
// already in it.
func TestCpOutRefusesUntrustedNames(t *testing.T) {
	file := func(p string) wire.FileInfo { return wire.FileInfo{Path: p, Type: "file", Size: 4, Mode: 644} }
	for _, tc := range []struct {
		name string
		list []wire.FileInfo
		want string
	}{
		{"dot-dot", []wire.FileInfo{file("/d/..")}, "not a plain name"},
		{"dot", []wire.FileInfo{{Path: "/d/.", Type: "directory", Mode: 755}}, "not a plain name"},
		{"empty", []wire.FileInfo{file("/d/")}, "not a plain name"},
		{"no directory", []wire.FileInfo{file("evil")}, "not a plain name"},
		{"through a link in the destination", []wire.FileInfo{file("/d/link")}, "cp: "},
		{"a directory through a link in the destination", []wire.FileInfo{{Path: "/d/dirlink", Type: "directory", Mode: 755}}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			outside := filepath.Join(base, "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(outside, "victim")
			if err := os.WriteFile(victim, []byte("safe"), 0o644); err != nil {
				t.Fatal(err)
			}
			// The copy merges into dst/d, which holds links out of it.
			dst := filepath.Join(base, "dst")
			if err := os.MkdirAll(filepath.Join(dst, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(victim, filepath.Join(dst, "d", "link")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(dst, "d", "dirlink")); err != nil {
				t.Fatal(err)
			}
			files := map[string]string{}
			for _, e := range tc.list {
				files[e.Path], files["/d/"+filepath.Base(e.Path)] = "EVIL", "EVIL"
			}
			var stderr bytes.Buffer
			c := &copier{x: fakeExecd(t, tc.list, files), stderr: &stderr}
			err := c.out(context.Background(), "/d", dst)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("copy: %v; want an error with %q", err, tc.want)
			}
			err = filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.Type().IsRegular() {
					return err
				}
				if b, _ := os.ReadFile(p); string(b) == "EVIL" {
					t.Errorf("the box's bytes were written to %s", p)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}
