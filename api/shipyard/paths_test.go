package shipyard

import (
	"strings"
	"testing"
)

func TestResolvePath(t *testing.T) {
	for _, tc := range []struct {
		in, want string // want "" means refused with invalid_path
	}{
		{"", "/workspace"},
		{".", "/workspace"},
		{"a.txt", "/workspace/a.txt"},
		{"./a/b/../c", "/workspace/a/c"},
		{"workspace/x", "/workspace/x"},
		{"/workspace/x", "/workspace/x"},
		{"workspace", "/workspace"},
		{"/workspace", "/workspace"},
		{"/workspace/", "/workspace"},
		{"workspacex/y", "/workspace/workspacex/y"},
		{"a//b/", "/workspace/a/b"},
		{"数据/文件.txt", "/workspace/数据/文件.txt"},
		{"a/..", "/workspace"},
		{"..", ""},
		{"../x", ""},
		{"a/../../x", ""},
		{"workspace/../etc", ""},
		{"/workspace/../etc/passwd", ""},
		{"/etc/passwd", ""},
		{"/workspacex", ""},
		{"a\x00b", ""},
	} {
		got, err := resolvePath(tc.in)
		if tc.want == "" {
			if err == nil || toError(err).Code != codeInvalidPath || toError(err).Status != 400 {
				t.Errorf("resolvePath(%q) = %q, %v; want invalid_path", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("resolvePath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

// FuzzResolvePath checks the rule every answer keeps: a refusal, or a
// clean absolute path in /workspace, that relPath shows relative and that
// resolves to itself again.
func FuzzResolvePath(f *testing.F) {
	for _, s := range []string{"", ".", "a/b", "../x", "/workspace/../x", "workspace/a/../..", "/etc", "a\x00", "数据/..//x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := resolvePath(in)
		if err != nil {
			if toError(err).Code != codeInvalidPath {
				t.Fatalf("resolvePath(%q): %v, want invalid_path", in, err)
			}
			return
		}
		if got != Workspace && !strings.HasPrefix(got, Workspace+"/") {
			t.Fatalf("resolvePath(%q) = %q: outside the workspace", in, got)
		}
		for _, el := range strings.Split(strings.TrimPrefix(got, Workspace+"/"), "/") {
			if el == ".." || (el == "" && got != Workspace) || el == "." {
				t.Fatalf("resolvePath(%q) = %q: not clean", in, got)
			}
		}
		if strings.IndexByte(got, 0) >= 0 {
			t.Fatalf("resolvePath(%q) = %q: NUL", in, got)
		}
		again, err := resolvePath(relPath(got))
		if err != nil || again != got {
			t.Fatalf("resolvePath(relPath(%q)) = %q, %v", got, again, err)
		}
	})
}
