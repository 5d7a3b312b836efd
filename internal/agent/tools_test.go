package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func newTestToolbox(t *testing.T) *toolbox {
	t.Helper()
	tb, err := newToolbox(t.TempDir(), nil, DefaultShellTimeout)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// runTool runs a tool with args encoded from v and decodes its result.
func runTool(t *testing.T, tb *toolbox, name string, v any) (map[string]any, error) {
	t.Helper()
	args, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tb.run(context.Background(), name, string(args))
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("%s result %s: %v", name, out, err)
	}
	return m, nil
}

func mustRun(t *testing.T, tb *toolbox, name string, v any) map[string]any {
	t.Helper()
	m, err := runTool(t, tb, name, v)
	if err != nil {
		t.Fatalf("%s %v: %v", name, v, err)
	}
	return m
}

func writeTestFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestResolve(t *testing.T) {
	tb := &toolbox{workspace: "/ws"}
	for _, tc := range []struct{ in, want, err string }{
		{in: "a.txt", want: "/ws/a.txt"},
		{in: "./dir/../b", want: "/ws/b"},
		{in: "/etc/hosts", want: "/etc/hosts"},
		{in: "../outside", want: "/outside"},
		{in: "/a//b/", want: "/a/b"},
		{in: ".", want: "/ws"},
		{in: "", err: "required"},
		{in: "a\x00b", err: "NUL"},
	} {
		got, err := tb.resolve(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("resolve(%q) = %q, %v; want an error about %s", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolve(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
		if d := tb.display(got); strings.HasPrefix(tc.want, "/ws") && filepath.IsAbs(d) {
			t.Errorf("display(%q) = %q, want it relative", got, d)
		}
	}
}

func TestDecodeArgs(t *testing.T) {
	for _, tc := range []struct {
		raw     string
		timeout int64
		all     bool
		err     bool
	}{
		{raw: ``},
		{raw: `null`},
		{raw: `{"timeout_seconds": 30}`, timeout: 30},
		{raw: `{"timeout_seconds": "45"}`, timeout: 45},
		{raw: `{"timeout_seconds": 5.0, "replace_all": "true"}`, timeout: 5, all: true},
		{raw: `{"replace_all": true, "unknown": [1]}`, all: true},
		{raw: `{"timeout_seconds": 1.5}`, err: true},
		{raw: `{"replace_all": "yes please"}`, err: true},
		{raw: `[1,2]`, err: true},
		{raw: `{"command": "ls"`, err: true},
	} {
		var v struct {
			TimeoutSeconds flexInt  `json:"timeout_seconds"`
			ReplaceAll     flexBool `json:"replace_all"`
		}
		err := decodeArgs(tc.raw, &v)
		if (err != nil) != tc.err || !tc.err && (int64(v.TimeoutSeconds) != tc.timeout || bool(v.ReplaceAll) != tc.all) {
			t.Errorf("decodeArgs(%s) = %+v, %v", tc.raw, v, err)
		}
	}
}

func TestFileToolsResolveInTheWorkspace(t *testing.T) {
	tb := newTestToolbox(t)
	ws := tb.workspace
	if got := mustRun(t, tb, toolWriteFile, map[string]string{"path": "a/b/c.txt", "content": "one\ntwo\nthree\n"}); got["bytes_written"] != 14.0 {
		t.Fatalf("write_file %v", got)
	}
	if got := readFile(t, filepath.Join(ws, "a/b/c.txt")); got != "one\ntwo\nthree\n" {
		t.Fatalf("file %q", got)
	}
	abs := filepath.Join(t.TempDir(), "abs.txt")
	mustRun(t, tb, toolWriteFile, map[string]string{"path": abs, "content": "x"})
	if readFile(t, abs) != "x" {
		t.Fatal("absolute path not honoured")
	}

	got := mustRun(t, tb, toolReadFile, map[string]any{"path": "a/b/c.txt", "offset": 2, "limit": 1})
	if got["content"] != "two\n" || got["total_lines"] != 3.0 || got["truncated"] != true {
		t.Fatalf("read_file window %v", got)
	}
	got = mustRun(t, tb, toolReadFile, map[string]any{"path": filepath.Join(ws, "a", "b", "c.txt")})
	if got["content"] != "one\ntwo\nthree\n" || got["truncated"] != false {
		t.Fatalf("read_file whole %v", got)
	}

	for _, tc := range []struct {
		args map[string]any
		want any    // replacements
		err  string // or an error
	}{
		{args: map[string]any{"old_string": "two", "new_string": "2"}, want: 1.0},
		{args: map[string]any{"old_string": "nine", "new_string": "9"}, err: "not found"},
		{args: map[string]any{"old_string": "e", "new_string": "E"}, err: "occurs 3 times"},
		{args: map[string]any{"old_string": "e", "new_string": "E", "replace_all": true}, want: 3.0},
		{args: map[string]any{"old_string": "", "new_string": "x"}, err: "empty"},
	} {
		tc.args["path"] = "a/b/c.txt"
		got, err := runTool(t, tb, toolEditFile, tc.args)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("edit_file %v: %v, %v; want an error about %q", tc.args, got, err, tc.err)
			}
			continue
		}
		if err != nil || got["replacements"] != tc.want {
			t.Errorf("edit_file %v: %v, %v", tc.args, got, err)
		}
	}
	if got := readFile(t, filepath.Join(ws, "a/b/c.txt")); got != "onE\n2\nthrEE\n" {
		t.Fatalf("edited %q", got)
	}

	got = mustRun(t, tb, toolListDir, map[string]any{})
	if entries := got["entries"].([]any); len(entries) != 1 || entries[0].(map[string]any)["name"] != "a" || entries[0].(map[string]any)["type"] != "dir" {
		t.Fatalf("list_dir %v", got)
	}
	got = mustRun(t, tb, toolListDir, map[string]any{"path": "a/b"})
	if e := got["entries"].([]any)[0].(map[string]any); e["name"] != "c.txt" || e["type"] != "file" || e["size"] != 12.0 {
		t.Fatalf("list_dir a/b %v", got)
	}

	for _, tc := range []struct{ tool, path, err string }{
		{toolReadFile, "nope.txt", "no such file"},
		{toolReadFile, "a", "is a directory"},
		{toolListDir, "a/b/c.txt", "not a directory"},
		{toolWriteFile, "", "path is required"},
	} {
		if _, err := runTool(t, tb, tc.tool, map[string]string{"path": tc.path}); err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s %q: %v, want an error about %q", tc.tool, tc.path, err, tc.err)
		}
	}
	writeTestFile(t, filepath.Join(ws, "bin.dat"), "\x00\x01\x02")
	if _, err := runTool(t, tb, toolReadFile, map[string]string{"path": "bin.dat"}); err == nil || !strings.Contains(err.Error(), "binary") {
		t.Errorf("read_file of a binary file: %v", err)
	}
}

func TestSearch(t *testing.T) {
	tb := newTestToolbox(t)
	ws := tb.workspace
	writeTestFile(t, filepath.Join(ws, "main.go"), "package main\n\nfunc main() { hello() }\n")
	writeTestFile(t, filepath.Join(ws, "sub/hello.go"), "package sub\n\nfunc hello() {}\n")
	writeTestFile(t, filepath.Join(ws, "sub/notes.txt"), "hello world\n")
	writeTestFile(t, filepath.Join(ws, ".git/config"), "hello from git\n")
	writeTestFile(t, filepath.Join(ws, "blob.bin"), "hello\x00binary\n")

	paths := func(m map[string]any) []string {
		var out []string
		for _, x := range m["matches"].([]any) {
			e := x.(map[string]any)
			out = append(out, fmt.Sprintf("%s:%v", e["path"], e["line"]))
		}
		return out
	}
	for _, tc := range []struct {
		args map[string]string
		want string
	}{
		{map[string]string{"pattern": "hello"}, "main.go:3 sub/hello.go:3 sub/notes.txt:1"},
		{map[string]string{"pattern": `func \w+\(\)`, "glob": "*.go"}, "main.go:3 sub/hello.go:3"},
		{map[string]string{"pattern": "hello", "path": "sub"}, "sub/hello.go:3 sub/notes.txt:1"},
		{map[string]string{"pattern": "hello", "path": "sub/notes.txt"}, "sub/notes.txt:1"},
		{map[string]string{"pattern": "hello", "glob": "sub/*.txt"}, "sub/notes.txt:1"},
		{map[string]string{"pattern": "absent"}, ""},
	} {
		got := mustRun(t, tb, toolSearch, tc.args)
		if s := strings.Join(paths(got), " "); s != tc.want || got["truncated"] != false {
			t.Errorf("search %v = %q (truncated %v), want %q", tc.args, s, got["truncated"], tc.want)
		}
	}
	for _, args := range []map[string]string{{"pattern": "("}, {"pattern": ""}, {"pattern": "x", "glob": "["}, {"pattern": "x", "path": "missing"}} {
		if _, err := runTool(t, tb, toolSearch, args); err == nil {
			t.Errorf("search %v: no error", args)
		}
	}
}

func TestToolOutputsAreBounded(t *testing.T) {
	tb := newTestToolbox(t)
	ws := tb.workspace

	t.Run("shell", func(t *testing.T) {
		got := mustRun(t, tb, toolShell, map[string]string{"command": "head -c 200000 /dev/zero | tr '\\0' x; echo END; head -c 100000 /dev/zero | tr '\\0' y >&2"})
		out, errOut := got["stdout"].(string), got["stderr"].(string)
		for name, s := range map[string]string{"stdout": out, "stderr": errOut} {
			if len(s) > maxStreamOutput+100 || !strings.Contains(s, "bytes omitted") {
				t.Errorf("%s is %d bytes: %.80q", name, len(s), s)
			}
		}
		if !strings.HasPrefix(out, "xxxx") || !strings.HasSuffix(out, "xEND\n") {
			t.Errorf("stdout lost its head or tail: %.40q ... %q", out, out[len(out)-40:])
		}
	})
	t.Run("shell timeout", func(t *testing.T) {
		got := mustRun(t, tb, toolShell, map[string]any{"command": "echo started; exec sleep 1000", "timeout_seconds": 1})
		if got["timed_out"] != true || got["exit_code"] != 137.0 || got["stdout"] != "started\n" {
			t.Fatalf("shell %v", got)
		}
	})
	t.Run("read_file lines", func(t *testing.T) {
		var b strings.Builder
		for i := 1; i <= 3000; i++ {
			fmt.Fprintf(&b, "line %d\n", i)
		}
		writeTestFile(t, filepath.Join(ws, "long.txt"), b.String())
		got := mustRun(t, tb, toolReadFile, map[string]any{"path": "long.txt", "limit": 5000})
		content := got["content"].(string)
		if n := strings.Count(content, "\n"); n != maxReadLines || got["total_lines"] != 3000.0 || got["truncated"] != true || !strings.HasSuffix(content, "line 2000\n") {
			t.Fatalf("read %d lines, total %v, truncated %v", n, got["total_lines"], got["truncated"])
		}
		got = mustRun(t, tb, toolReadFile, map[string]any{"path": "long.txt", "offset": 2001})
		if c := got["content"].(string); !strings.HasPrefix(c, "line 2001\n") || !strings.HasSuffix(c, "line 3000\n") || got["truncated"] != false {
			t.Fatalf("second window %.20q... truncated %v", c, got["truncated"])
		}
	})
	t.Run("read_file bytes", func(t *testing.T) {
		writeTestFile(t, filepath.Join(ws, "wide.txt"), strings.Repeat("é", 100000)+"\nshort\n")
		got := mustRun(t, tb, toolReadFile, map[string]string{"path": "wide.txt"})
		c := got["content"].(string)
		if len(c) > maxReadBytes || len(c) < maxReadBytes-4 || strings.ContainsRune(c, '\uFFFD') || got["truncated"] != true || got["total_lines"] != 2.0 {
			t.Fatalf("content of %d bytes, truncated %v, total %v", len(c), got["truncated"], got["total_lines"])
		}
	})
	t.Run("list_dir", func(t *testing.T) {
		dir := filepath.Join(ws, "many")
		for i := range maxDirItems + 5 {
			writeTestFile(t, filepath.Join(dir, fmt.Sprintf("f%04d", i)), "")
		}
		got := mustRun(t, tb, toolListDir, map[string]string{"path": "many"})
		if n := len(got["entries"].([]any)); n != maxDirItems || got["truncated"] != true {
			t.Fatalf("%d entries, truncated %v", n, got["truncated"])
		}
	})
	t.Run("search", func(t *testing.T) {
		writeTestFile(t, filepath.Join(ws, "hits", "h.txt"), strings.Repeat("needle "+strings.Repeat("n", 2000)+"\n", 300))
		got := mustRun(t, tb, toolSearch, map[string]string{"pattern": "needle", "path": "hits"})
		m := got["matches"].([]any)
		if len(m) != maxSearchMatches || got["truncated"] != true || len(m[0].(map[string]any)["text"].(string)) > maxMatchText {
			t.Fatalf("%d matches, truncated %v", len(m), got["truncated"])
		}
	})
}

func TestHeadTail(t *testing.T) {
	for _, tc := range []struct {
		writes []string
		limit  int
		want   string
	}{
		{[]string{"abc"}, 10, "abc"},
		{[]string{"abcde", "fghij"}, 10, "abcdefghij"},
		{[]string{"abcdefghijkl"}, 10, "abcde\n[... 2 bytes omitted ...]\nhijkl"},
		{[]string{"ab", "cd", "ef", "gh", "ij", "kl", "mn"}, 4, "ab\n[... 10 bytes omitted ...]\nmn"},
	} {
		h := newHeadTail(tc.limit)
		for _, w := range tc.writes {
			h.Write([]byte(w))
		}
		if got := h.String(); got != tc.want {
			t.Errorf("%v limit %d: %q, want %q", tc.writes, tc.limit, got, tc.want)
		}
	}
}

func TestShellRunsWithEmptyStdinInTheWorkspace(t *testing.T) {
	tb := newTestToolbox(t)
	got := mustRun(t, tb, toolShell, map[string]string{"command": "pwd; cat; echo done"})
	if got["stdout"] != tb.workspace+"\ndone\n" || got["exit_code"] != 0.0 {
		t.Fatalf("shell %v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tb.run(ctx, toolShell, `{"command":"true"}`); err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("shell with a done context: %v", err)
	}
	if got := (shellArgs{TimeoutSeconds: 1 << 40}).timeout(time.Second); got != maxShellTimeout {
		t.Fatalf("capped timeout %v", got)
	}
}
