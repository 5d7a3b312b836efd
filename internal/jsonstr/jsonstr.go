// Package jsonstr encodes and decodes JSON strings quickly, for the hot
// path of output streams, where encoding/json's reflection and validation
// passes dominate. Output is what encoding/json accepts; input is what it
// produces (and any valid JSON string).
package jsonstr

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

const hex = "0123456789abcdef"

// safe[b] is true for ASCII bytes that need no escaping.
var safe = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// Append appends s to dst as a quoted JSON string. Invalid UTF-8 becomes
// U+FFFD; U+2028 and U+2029 are escaped so the output is also valid
// JavaScript. HTML characters are not escaped.
func Append(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if safe[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// AppendBytes is Append for a byte slice, without copying b to a string
// first; b is only read, and not retained.
func AppendBytes(dst, b []byte) []byte {
	return Append(dst, unsafe.String(unsafe.SliceData(b), len(b)))
}

// ErrSyntax reports a malformed JSON string.
var ErrSyntax = errors.New("jsonstr: malformed JSON string")

// Unquote decodes the JSON string that starts at data[0] (a '"') and
// returns its value and the number of bytes it occupied.
func Unquote(data []byte) (string, int, error) {
	if len(data) == 0 || data[0] != '"' {
		return "", 0, ErrSyntax
	}
	// Fast path: no escapes.
	for i := 1; i < len(data); i++ {
		switch c := data[i]; {
		case c == '"':
			if !utf8.Valid(data[1:i]) {
				return unquoteSlow(data)
			}
			return string(data[1:i]), i + 1, nil
		case c == '\\':
			return unquoteSlow(data)
		case c < 0x20:
			return "", 0, ErrSyntax
		}
	}
	return "", 0, ErrSyntax
}

func unquoteSlow(data []byte) (string, int, error) {
	out := make([]byte, 0, len(data))
	for i := 1; i < len(data); {
		c := data[i]
		switch {
		case c == '"':
			return string(out), i + 1, nil
		case c < 0x20:
			return "", 0, ErrSyntax
		case c == '\\':
			if i+1 >= len(data) {
				return "", 0, ErrSyntax
			}
			e := data[i+1]
			i += 2
			switch e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r, ok := hex4(data[i:])
				if !ok {
					return "", 0, ErrSyntax
				}
				i += 4
				if utf16.IsSurrogate(r) {
					r2 := rune(-1)
					if i+6 <= len(data) && data[i] == '\\' && data[i+1] == 'u' {
						if v, ok := hex4(data[i+2:]); ok {
							r2 = v
						}
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
						i += 6
					} else {
						r = utf8.RuneError
					}
				}
				out = utf8.AppendRune(out, r)
			default:
				return "", 0, ErrSyntax
			}
		case c < utf8.RuneSelf:
			j := i + 1
			for j < len(data) && data[j] < utf8.RuneSelf && safe[data[j]] {
				j++
			}
			out = append(out, data[i:j]...)
			i = j
		default:
			r, size := utf8.DecodeRune(data[i:])
			if r == utf8.RuneError && size == 1 {
				out = append(out, "\uFFFD"...)
			} else {
				out = append(out, data[i:i+size]...)
			}
			i += size
		}
	}
	return "", 0, ErrSyntax
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}
