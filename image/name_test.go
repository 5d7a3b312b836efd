package image

import (
	"path"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

func TestParseName(t *testing.T) {
	tests := []struct {
		in   string
		want string // canonical; empty: invalid
	}{
		{"debian", "debian:latest"},
		{"debian:bookworm", "debian:bookworm"},
		{"my-image_1.0:V1.2-rc_3", "my-image_1.0:V1.2-rc_3"},
		{"0day", "0day:latest"},
		{"host", "host:latest"},
		{"", ""},
		{":tag", ""},
		{"debian:", ""},
		{"Debian", ""},
		{".hidden", ""},
		{"-dash", ""},
		{"_under", ""},
		{"a/b", "a/b:latest"},
		{"opensandbox/code-interpreter:latest", "opensandbox/code-interpreter:latest"},
		{"localhost:5000/team/img:v1", "localhost:5000/team/img:v1"},
		{"registry.example.com/a/b@sha256:abababababababababababababababababababababababababababababababab", "registry.example.com/a/b@sha256:abababababababababababababababababababababababababababababababab"},
		{"reg.io:5000/x", "reg.io:5000/x:latest"},
		{"../x", ""},
		{"a//b", ""},
		{"a/", ""},
		{"/a", ""},
		{"A/b", ""},
		{"a/b:", ""},
		{"a/.b", ""},
		{"reg.io:99999/x", ""},
		{"reg.io:050/x", ""},
		{"-reg.io/x", ""},
		{"a@sha256:abc", ""},
		{"a@md5:abababababababababababababababababababababababababababababababab", ""},
		{"a/b/../c", ""},
		{"a:b:c", ""},
		{"a:.tag", ""},
		{"a:-tag", ""},
		{"a:t/g", ""},
		{"a+b", ""},
		{"a b", ""},
		{"a\x00", ""},
		{strings.Repeat("a", maxRepoLen), strings.Repeat("a", maxRepoLen) + ":latest"},
		{strings.Repeat("a", maxRepoLen+1), ""},
		{"a:" + strings.Repeat("T", maxTagLen), "a:" + strings.Repeat("T", maxTagLen)},
		{"a:" + strings.Repeat("T", maxTagLen+1), ""},
	}
	for _, tt := range tests {
		ref, err := ParseName(tt.in)
		if tt.want == "" {
			if err == nil {
				t.Errorf("ParseName(%q) = %v, want an error", tt.in, ref)
			} else if sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
				t.Errorf("ParseName(%q): code %s", tt.in, sandbox.CodeOf(err))
			}
			continue
		}
		if err != nil || ref.String() != tt.want {
			t.Errorf("ParseName(%q) = %v, %v; want %s", tt.in, ref, err, tt.want)
		}
	}
}

func FuzzParseName(f *testing.F) {
	for _, s := range []string{"debian", "debian:bookworm", "a.b-c_d:E_1", "..", "a:..", "a+b:c", "x:y/z", "host", "opensandbox/code-interpreter:latest", "localhost:5000/a/b", "r.io/x@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", "a!b", "a=b/c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := ParseName(s)
		if err != nil {
			return
		}
		d := ref.dirName()
		if d == "" || len(d) > 255 || strings.ContainsAny(d, "/\x00") || strings.HasPrefix(d, ".") || path.Clean(d) != d {
			t.Fatalf("ParseName(%q): unsafe directory name %q", s, d)
		}
		if back, ok := parseDirName(d); !ok || back != ref {
			t.Fatalf("directory name %q of %q parses back to %v, %v", d, s, back, ok)
		}
		again, err := ParseName(ref.String())
		if err != nil || again != ref {
			t.Fatalf("canonical %q of %q does not round-trip: %v, %v", ref.String(), s, again, err)
		}
	})
}
