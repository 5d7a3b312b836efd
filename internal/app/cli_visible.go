package app

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Text from a box or a model (replies, tool output, file names, error
// messages) is shown through visible before it reaches a terminal, so
// that it cannot drive it: set the clipboard (OSC 52), clear the screen,
// retitle the window, hide or overwrite text, or reorder a line.

// visible returns s with every character that would control a terminal
// shown as text instead, as `cat -v` and `less` show them: C0 controls
// and DEL in caret notation (ESC as ^[, a carriage return that ends no
// line as ^M), C1 controls (U+0080 to U+009F) and the bidirectional
// formatting characters as <U+202E>, and bytes that are not UTF-8 as <FF>.
// Newlines and tabs are kept, and a CRLF line end becomes a newline.
func visible(s string) string {
	if !needsVisible(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "<%02X>", s[i])
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
			// A CRLF line end: its newline follows.
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			b.WriteByte('^')
			b.WriteByte(byte(r) ^ 0x40)
		case isC1(r) || isBidi(r):
			fmt.Fprintf(&b, "<U+%04X>", r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// visibleField is visible for a table's cell: newlines and tabs, which
// would break its row, are shown too (as ^J and ^I).
func visibleField(s string) string {
	return strings.NewReplacer("\n", "^J", "\t", "^I").Replace(visible(s))
}

// needsVisible reports whether visible would change s.
func needsVisible(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f {
			return true
		}
		if c < utf8.RuneSelf {
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || isC1(r) || isBidi(r) {
			return true
		}
		i += n - 1
	}
	return false
}

func isC1(r rune) bool { return r >= 0x80 && r <= 0x9f }

// isBidi reports whether r is a bidirectional formatting character: the
// marks, embeddings, overrides and isolates that reorder what a line shows.
func isBidi(r rune) bool {
	return r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// visibleJSON escapes, in JSON that encoding/json wrote, what it leaves
// raw that would control a terminal: DEL, C1 controls and the
// bidirectional formatting characters become \uXXXX escapes, and a byte
// that is not UTF-8 (passed through in a json.RawMessage) \ufffd, as
// encoding/json writes it in a string. None of them can be outside a
// string there, so the JSON holds the same values.
func visibleJSON(b []byte) []byte {
	if !needsVisible(string(b)) {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == 0x7f || isC1(r) || isBidi(r) || (r == utf8.RuneError && n == 1) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+n]...)
		}
		i += n
	}
	return out
}
