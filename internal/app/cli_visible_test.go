package app

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestVisible(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"plain text", "hello, world", "hello, world"},
		{"newlines and tabs", "a\tb\nc\n", "a\tb\nc\n"},
		{"unicode", "héllo — 世界 🙂 \uFFFD", "héllo — 世界 🙂 \uFFFD"},
		{"empty", "", ""},
		{"clear screen", "\x1b[2J\x1b[H", "^[[2J^[[H"},
		{"OSC 52", "\x1b]52;c;aGk=\x07", "^[]52;c;aGk=^G"},
		{"window title", "\x1b]0;t\x1b\\", "^[]0;t^[\\"},
		{"hidden text", "\x1b[8mx\x1b[28m", "^[[8mx^[[28m"},
		{"NUL, backspace, DEL", "\x00\b\x7f", "^@^H^?"},
		{"CRLF line ends", "a\r\nb\r\n", "a\nb\n"},
		{"a lone carriage return", "safe\rowned\r", "safe^Mowned^M"},
		{"C1 controls", "\u009b2J\u0085\u0080\u009f", "<U+009B>2J<U+0085><U+0080><U+009F>"},
		{"bidi overrides and isolates", "a\u202eb\u2066c\u2069\u200f\u061c", "a<U+202E>b<U+2066>c<U+2069><U+200F><U+061C>"},
		{"bytes that are not UTF-8", "a\x9b2Jb\xff", "a<9B>2Jb<FF>"},
		{"a cut UTF-8 sequence", "\xe2\x80", "<E2><80>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := visible(tc.in); got != tc.want {
				t.Fatalf("visible(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestVisibleField(t *testing.T) {
	if got, want := visibleField("a\tb\nc\x1b"), "a^Ib^Jc^["; got != want {
		t.Fatalf("visibleField = %q, want %q", got, want)
	}
}

func TestVisibleJSON(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"plain", map[string]string{"k": "héllo"}, `{"k":"héllo"}`},
		{"C0 controls, escaped by encoding/json", "\x1b[2J", `"\u001b[2J"`},
		{"DEL and C1", "\x7f\u009b2J", `"\u007f\u009b2J"`},
		{"bidi", "\u202etxt", `"\u202etxt"`},
		{"a raw message with a byte that is not UTF-8", json.RawMessage("\"a\x9bb\""), `"a\ufffdb"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			got := visibleJSON(b)
			if string(got) != tc.want {
				t.Fatalf("visibleJSON(%q) = %s, want %s", b, got, tc.want)
			}
			if !json.Valid(got) {
				t.Fatalf("%s is not JSON", got)
			}
		})
	}
}

// terminalControl reports whether r would control a terminal: a control
// character other than newline and tab, or a bidirectional formatting
// character.
func terminalControl(r rune) bool {
	return (r < 0x20 && r != '\n' && r != '\t') || (r >= 0x7f && r <= 0x9f) || isBidi(r)
}

// FuzzVisibleControls: visible's output is UTF-8 and holds no control
// character but newline and tab, and no bidirectional formatting
// character; it is left as it is by visible again; and text without
// controls passes unchanged. visibleJSON keeps the value and escapes the
// same characters.
func FuzzVisibleControls(f *testing.F) {
	for _, s := range []string{"", "plain", "\x1b]52;c;aGk=\x07", "\x1b[2J", "\x1b]0;t\x1b\\", "\x1b[8m", "a\r\nb\rc",
		"\u009b2J", "\u202e\u2066", "\xff\x9b", "\xe2\x80", "héllo\t世界\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := visible(s)
		if !utf8.ValidString(out) {
			t.Fatalf("visible(%q) = %q: not UTF-8", s, out)
		}
		if i := strings.IndexFunc(out, terminalControl); i >= 0 {
			t.Fatalf("visible(%q) = %q: a control at %d", s, out, i)
		}
		if again := visible(out); again != out {
			t.Fatalf("visible(%q) = %q, and again %q", s, out, again)
		}
		if utf8.ValidString(s) && !strings.ContainsFunc(s, terminalControl) && out != s {
			t.Fatalf("visible(%q) = %q: text without controls changed", s, out)
		}

		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		esc := visibleJSON(b)
		if i := strings.IndexFunc(string(esc), terminalControl); i >= 0 || !utf8.Valid(esc) {
			t.Fatalf("visibleJSON(%q) = %q: a control at %d", b, esc, i)
		}
		var back, want string
		if err := json.Unmarshal(esc, &back); err != nil {
			t.Fatalf("visibleJSON(%q) = %q: %v", b, esc, err)
		}
		_ = json.Unmarshal(b, &want)
		if back != want {
			t.Fatalf("visibleJSON(%q) = %q: holds %q, want %q", b, esc, back, want)
		}
	})
}
