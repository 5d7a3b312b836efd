// Package glob matches slash-separated paths against shell-style patterns
// extended with `**`.
//
// Pattern syntax, segment by segment (segments are separated by '/'):
//
//   - any sequence of characters other than '/'
//     ?      any one character other than '/'
//     [...]  one character of a class: single characters and ranges "a-z";
//     a leading '!' or '^' negates it; '-', ']' and '\' inside a class
//     must be escaped with '\'; a class is never empty
//     \c     the character c literally
//     **     as a whole segment: zero or more segments; inside a segment it
//     is the same as *
//
// A pattern without '/' is matched against the base name (the last
// segment) of the name, so "*.txt" matches "a/b/c.txt" at any depth, and
// "**" matches every name. A pattern with '/' must match the whole name.
// '/' itself cannot be escaped. Wildcards match names that start with '.'.
//
// The syntax inside a segment is that of path.Match, plus '!' negation.
package glob

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrBadPattern is wrapped by the errors of Compile and Match for a
// malformed pattern.
var ErrBadPattern = errors.New("syntax error in pattern")

// Pattern is a compiled pattern, safe for concurrent use.
type Pattern struct {
	src  string
	base bool // no '/': match the base name only
	segs []segment
}

// segment is one '/'-separated piece of a pattern.
type segment struct {
	any bool   // "**": zero or more name segments
	pat string // otherwise a validated single-segment pattern
}

// Compile parses pattern. Its error wraps ErrBadPattern.
func Compile(pattern string) (*Pattern, error) {
	p := &Pattern{src: pattern, base: !strings.Contains(pattern, "/")}
	for s := range strings.SplitSeq(pattern, "/") {
		if s == "**" {
			if n := len(p.segs); n > 0 && p.segs[n-1].any {
				continue // "**/**" is the same as "**"
			}
			p.segs = append(p.segs, segment{any: true})
			continue
		}
		if err := validate(s); err != nil {
			return nil, fmt.Errorf("pattern %q: %w", pattern, err)
		}
		p.segs = append(p.segs, segment{pat: s})
	}
	return p, nil
}

// Match reports whether name matches pattern. Its only error wraps
// ErrBadPattern.
func Match(pattern, name string) (bool, error) {
	p, err := Compile(pattern)
	if err != nil {
		return false, err
	}
	return p.Match(name), nil
}

// String is the source of the pattern.
func (p *Pattern) String() string { return p.src }

// Match reports whether name (a slash-separated path) matches p.
func (p *Pattern) Match(name string) bool {
	if p.base {
		base := name[strings.LastIndexByte(name, '/')+1:]
		return p.segs[0].any || matchSegment(p.segs[0].pat, base)
	}
	return matchSegments(p.segs, strings.Split(name, "/"))
}

// matchSegments matches name segments against pattern segments, where an
// `any` segment stands for zero or more name segments. It backtracks only to
// the last `any` seen, which is enough because `any` matches every
// sequence: the classic linear-space wildcard algorithm, lifted from
// characters to segments.
func matchSegments(segs []segment, names []string) bool {
	pi, ni := 0, 0
	starPi, starNi := -1, 0
	for ni < len(names) {
		switch {
		case pi < len(segs) && segs[pi].any:
			starPi, starNi = pi+1, ni
			pi++
			continue
		case pi < len(segs) && matchSegment(segs[pi].pat, names[ni]):
			pi++
			ni++
			continue
		case starPi >= 0:
			starNi++
			pi, ni = starPi, starNi
			continue
		}
		return false
	}
	for pi < len(segs) && segs[pi].any {
		pi++
	}
	return pi == len(segs)
}

// matchSegment reports whether s matches the validated single-segment
// pattern pat, backtracking only to the last '*'.
func matchSegment(pat, s string) bool {
	px, sx := 0, 0
	starPx, starSx := -1, 0
	for px < len(pat) || sx < len(s) {
		if px < len(pat) {
			switch c := pat[px]; {
			case c == '*':
				starPx, starSx = px+1, sx
				px++
				continue
			case sx == len(s):
				// Only a '*' matches at the end of s.
			case c == '?':
				_, w := utf8.DecodeRuneInString(s[sx:])
				px++
				sx += w
				continue
			case c == '[':
				r, w := utf8.DecodeRuneInString(s[sx:])
				if ok, n := matchClass(pat[px:], r); ok {
					px += n
					sx += w
					continue
				}
			default:
				lit, n := literal(pat[px:])
				if strings.HasPrefix(s[sx:], lit) {
					px += n
					sx += len(lit)
					continue
				}
			}
		}
		if starPx >= 0 && starSx < len(s) {
			_, w := utf8.DecodeRuneInString(s[starSx:])
			starSx += w
			px, sx = starPx, starSx
			continue
		}
		return false
	}
	return true
}

// literal returns the bytes a literal at the start of pat stands for and
// how many pattern bytes it takes ("\*" stands for "*").
func literal(pat string) (string, int) {
	if pat[0] == '\\' {
		_, w := utf8.DecodeRuneInString(pat[1:])
		return pat[1 : 1+w], 1 + w
	}
	_, w := utf8.DecodeRuneInString(pat)
	return pat[:w], w
}

// matchClass matches r against the validated class at the start of pat
// and returns the class's length in pattern bytes.
func matchClass(pat string, r rune) (bool, int) {
	i := 1
	negate := false
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		negate = true
		i++
	}
	match := false
	for n := 0; ; n++ {
		if pat[i] == ']' && n > 0 {
			i++
			break
		}
		lo, w := classChar(pat[i:])
		i += w
		hi := lo
		if pat[i] == '-' {
			hi, w = classChar(pat[i+1:])
			i += 1 + w
		}
		match = match || (lo <= r && r <= hi)
	}
	return match != negate, i
}

// classChar decodes one possibly escaped character of a validated class.
func classChar(s string) (rune, int) {
	if s[0] == '\\' {
		r, w := utf8.DecodeRuneInString(s[1:])
		return r, 1 + w
	}
	r, w := utf8.DecodeRuneInString(s)
	return r, w
}

// validate checks the syntax of a single-segment pattern.
func validate(pat string) error {
	for i := 0; i < len(pat); {
		switch pat[i] {
		case '\\':
			if i+1 >= len(pat) {
				return fmt.Errorf("%w: trailing backslash", ErrBadPattern)
			}
			_, w := utf8.DecodeRuneInString(pat[i+1:])
			i += 1 + w
		case '[':
			n, err := validateClass(pat[i:])
			if err != nil {
				return err
			}
			i += n
		default:
			i++
		}
	}
	return nil
}

// validateClass checks the class at the start of pat and returns its
// length.
func validateClass(pat string) (int, error) {
	i := 1
	if i < len(pat) && (pat[i] == '!' || pat[i] == '^') {
		i++
	}
	for n := 0; ; n++ {
		if i >= len(pat) {
			return 0, fmt.Errorf("%w: unterminated character class", ErrBadPattern)
		}
		if pat[i] == ']' && n > 0 {
			return i + 1, nil
		}
		w, err := validateClassChar(pat[i:])
		if err != nil {
			return 0, err
		}
		i += w
		if i < len(pat) && pat[i] == '-' {
			w, err := validateClassChar(pat[i+1:])
			if err != nil {
				return 0, err
			}
			i += 1 + w
		}
	}
}

func validateClassChar(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: unterminated character class", ErrBadPattern)
	}
	if s[0] == '-' || s[0] == ']' {
		return 0, fmt.Errorf("%w: unescaped %q in character class", ErrBadPattern, s[0])
	}
	off := 0
	if s[0] == '\\' {
		off = 1
		if len(s) == 1 {
			return 0, fmt.Errorf("%w: trailing backslash", ErrBadPattern)
		}
	}
	r, w := utf8.DecodeRuneInString(s[off:])
	if r == utf8.RuneError && w == 1 {
		return 0, fmt.Errorf("%w: invalid UTF-8 in character class", ErrBadPattern)
	}
	return off + w, nil
}
