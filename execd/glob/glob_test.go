package glob

import (
	"errors"
	"path"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		// Base-name patterns match at any depth.
		{"*.txt", "a.txt", true},
		{"*.txt", "dir/sub/a.txt", true},
		{"*.txt", "dir/a.txt/b", false},
		{"*.txt", "a.txt.bak", false},
		{"a.txt", "x/a.txt", true},
		{"?.go", "x/y/a.go", true},
		{"?.go", "ab.go", false},
		{"*", "x/y/.hidden", true},
		{"**", "", true},
		{"**", "a/b/c", true},
		{"a**b", "axyzb", true},
		{"a**b", "ax/ayb", true},
		{"a**b", "ax/yb", false},
		// Path patterns match the whole name.
		{"dir/*.txt", "dir/a.txt", true},
		{"dir/*.txt", "dir/sub/a.txt", false},
		{"dir/**/*.txt", "dir/a.txt", true},
		{"dir/**/*.txt", "dir/sub/deeper/a.txt", true},
		{"dir/**/*.txt", "other/a.txt", false},
		{"**/*.txt", "a.txt", true},
		{"**/*.txt", "x/y/a.txt", true},
		{"**/x/**/y", "x/y", true},
		{"**/x/**/y", "a/x/b/c/y", true},
		{"**/x/**/y", "a/x/b/c/y/z", false},
		{"dir/**", "dir", true},
		{"dir/**", "dir/a/b", true},
		{"dir/**", "dirx/a", false},
		{"**/**/a", "a", true},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/b/d/c", false},
		{"a/?/c", "a/bb/c", false},
		// Classes.
		{"[abc].go", "b.go", true},
		{"[abc].go", "d.go", false},
		{"[a-c]x", "bx", true},
		{"[!a-c]x", "bx", false},
		{"[^a-c]x", "dx", true},
		{"[\\]]", "]", true},
		{"[\\-]", "-", true},
		{"[é]", "é", true},
		{"[α-ω]", "λ", true},
		// Escapes and literals.
		{"\\*", "*", true},
		{"\\*", "a", false},
		{"a\\?b", "a?b", true},
		{"a\\?b", "axb", false},
		{"", "", true},
		{"", "a", false},
		// Backtracking.
		{"*a*b*c", "xaybzc", true},
		{"*a*b*c", "xaybzcq", false},
		{"a*a*a*a*b", strings.Repeat("a", 64), false},
		{"a/**/b/**/c", "a/" + strings.Repeat("b/", 40) + "x", false},
		// Multi-byte names.
		{"?", "é", true},
		{"*é", "aé", true},
	}
	for _, tt := range tests {
		got, err := Match(tt.pattern, tt.name)
		if err != nil {
			t.Errorf("Match(%q, %q): %v", tt.pattern, tt.name, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestBadPattern(t *testing.T) {
	for _, p := range []string{"[", "[]", "[a", "[a-]", "[-a]", "a\\", "[\\", "[a-\\", "x/[/]", "[!]", "[\xff]", "**/[z"} {
		if _, err := Compile(p); !errors.Is(err, ErrBadPattern) {
			t.Errorf("Compile(%q) error = %v, want ErrBadPattern", p, err)
		}
		if _, err := Match(p, "x"); !errors.Is(err, ErrBadPattern) {
			t.Errorf("Match(%q) error = %v, want ErrBadPattern", p, err)
		}
	}
}

func TestPatternString(t *testing.T) {
	p, err := Compile("src/**/*.go")
	if err != nil {
		t.Fatal(err)
	}
	if p.String() != "src/**/*.go" {
		t.Fatalf("String() = %q", p.String())
	}
}

// FuzzMatch checks that Match never panics, that a pattern without
// metacharacters matches itself, and that within one segment it agrees with
// path.Match wherever both syntaxes coincide.
func FuzzMatch(f *testing.F) {
	for _, s := range [][2]string{
		{"*.txt", "a/b.txt"}, {"**/x/*", "a/x/b"}, {"[a-z]?", "q1"}, {"a\\*", "a*"},
		{"[^x]", "y"}, {"**", ""}, {"*a*b", "aab"}, {"[\\]-\\^]", "^"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		p, err := Compile(pattern)
		if err != nil {
			if !errors.Is(err, ErrBadPattern) {
				t.Fatalf("Compile(%q): error %v does not wrap ErrBadPattern", pattern, err)
			}
			return
		}
		got := p.Match(name)
		if !strings.ContainsAny(name, `*?[\`) && !strings.Contains(name, "//") {
			if lp, err := Compile(name); err == nil && !lp.Match(name) && name != "" {
				t.Fatalf("literal pattern %q does not match itself", name)
			}
		}
		if strings.ContainsAny(pattern, "/!") || strings.Contains(name, "/") ||
			!utf8.ValidString(pattern) || !utf8.ValidString(name) {
			return
		}
		want, err := path.Match(pattern, name)
		if err != nil {
			return
		}
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, path.Match says %v", pattern, name, got, want)
		}
	})
}
