package execd

import (
	"bytes"
	"syscall"
	"testing"
	"unicode/utf8"
)

func TestSplitIncompleteRune(t *testing.T) {
	tests := []struct {
		in, whole, tail string
	}{
		{"", "", ""},
		{"abc", "abc", ""},
		{"a\xe2\x82", "a", "\xe2\x82"},
		{"a\xe2\x82\xac", "a\xe2\x82\xac", ""},
		{"\xf0\x9f\x98", "", "\xf0\x9f\x98"},
		{"x\xff", "x\xff", ""}, // invalid, not incomplete: passed through
		{"\x82\x82\x82\x82", "\x82\x82\x82\x82", ""},
	}
	for _, tt := range tests {
		w, tl := splitIncompleteRune([]byte(tt.in))
		if string(w) != tt.whole || string(tl) != tt.tail {
			t.Errorf("split(%q) = %q, %q; want %q, %q", tt.in, w, tl, tt.whole, tt.tail)
		}
	}
}

func FuzzSplitIncompleteRune(f *testing.F) {
	f.Add([]byte("h\xc3\xa9llo\xe2\x82"))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, tl := splitIncompleteRune(b)
		if !bytes.Equal(append(append([]byte{}, w...), tl...), b) {
			t.Fatal("split lost bytes")
		}
		if len(tl) >= utf8.UTFMax {
			t.Fatalf("tail too long: %q", tl)
		}
		if utf8.Valid(b) && !utf8.Valid(w) {
			t.Fatalf("whole part of valid input is invalid: %q", w)
		}
	})
}

func TestParseSignal(t *testing.T) {
	tests := []struct {
		in   string
		want syscall.Signal
		ok   bool
	}{
		{"SIGTERM", syscall.SIGTERM, true},
		{"term", syscall.SIGTERM, true},
		{" INT ", syscall.SIGINT, true},
		{"9", syscall.SIGKILL, true},
		{"0", 0, false},
		{"65", 0, false},
		{"SIGNOPE", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, err := parseSignal(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("parseSignal(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestMergeEnv(t *testing.T) {
	got, err := mergeEnv([]string{"A=1", "B=2"}, map[string]string{"B": "3", "C": ""})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"A=1": true, "B=3": true, "C=": true}
	if len(got) != 3 {
		t.Fatalf("got %v", got)
	}
	for _, kv := range got {
		if !want[kv] {
			t.Fatalf("unexpected %q in %v", kv, got)
		}
	}
	for _, bad := range []map[string]string{{"1A": "x"}, {"A=B": "x"}, {"": "x"}, {"A": "nul\x00"}} {
		if _, err := mergeEnv(nil, bad); err == nil {
			t.Errorf("mergeEnv accepted %q", bad)
		}
	}
}

func TestResolveDir(t *testing.T) {
	base := t.TempDir()
	tests := []struct {
		cwd  string
		want string
		ok   bool
	}{
		{"", base, true},
		{".", base, true},
		{"/", "/", true},
		{"missing", "", false},
		{"bad\x00", "", false},
	}
	for _, tt := range tests {
		got, err := resolveDir(base, tt.cwd)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("resolveDir(%q) = %q, %v", tt.cwd, got, err)
		}
	}
}
