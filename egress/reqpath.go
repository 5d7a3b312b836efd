package egress

import (
	"net/http"
	"strings"
)

// Request paths as the proxy forwards them. Whether a credential may go
// with a request (a secret's path prefix, a binding's path patterns) is
// decided on the path exactly as the request goes upstream: escaped, as
// req.Write puts it on the request line. Upstreams read that path in
// different ways: some decode escapes before they route, some resolve
// dot segments (and "%2e%2e" as ".."), some take '\' or an encoded '/'
// for a separator, servlet containers cut ";parameters" off segments
// ("..;" is ".."), some merge empty segments. A path restriction holds
// only on a path that reads the same under all of these: see
// unambiguousPath, and spelledPrefix for how its prefix is compared.

// forwardedPath returns the path req goes upstream with: the request
// target that req.Write puts on the request line, without its query.
// A target that is not a path (CONNECT's authority, an opaque URL) does
// not begin with '/'.
func forwardedPath(req *http.Request) string {
	if req.URL == nil || req.Method == http.MethodConnect && req.URL.Path == "" {
		return ""
	}
	p, _, _ := strings.Cut(req.URL.RequestURI(), "?")
	return p
}

// unambiguousPath reports whether p, a path as forwarded (escaped), reads
// the same to every common upstream as far as its segments go: it begins
// with '/', holds no separator but '/' (no '\', no %2f or %5c in either
// case) and no dot segment however it is spelt ("." or "..", each dot as
// itself or as %2e or %2E, alone or before a ";" path parameter).
func unambiguousPath(p string) bool {
	if !strings.HasPrefix(p, "/") || strings.IndexByte(p, '\\') >= 0 {
		return false
	}
	for i := 0; i+2 < len(p); i++ {
		if hi, lo := p[i+1], p[i+2]|0x20; p[i] == '%' && (hi == '2' && lo == 'f' || hi == '5' && lo == 'c') {
			return false
		}
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		seg, _, _ = strings.Cut(seg, ";")
		if dotSegment(seg) {
			return false
		}
	}
	return true
}

// dotSegment reports whether seg, a segment as forwarded, is "." or ".."
// with each dot as itself or %2e (either case).
func dotSegment(seg string) bool {
	dots := 0
	for i := 0; i < len(seg); dots++ {
		switch {
		case seg[i] == '.':
			i++
		case strings.HasPrefix(seg[i:], "%2e") || strings.HasPrefix(seg[i:], "%2E"):
			i += 3
		default:
			return false
		}
	}
	return dots == 1 || dots == 2
}

// spelledPrefix reports whether p, a path as forwarded, begins with
// literal (a path as configured, unescaped) spelt as a request target
// must spell it, and returns the rest of p: each byte of literal that may
// stand in a path as it is ('/' and RFC 3986's pchar: letters, digits,
// "-._~!$&'()*+,;=:@") must be itself, any other byte %XX (hex in either
// case). So "/files/a b" begins "/files/a%20b/x" but not "/files/a+b"; and
// "/v1" does not begin "/%76%31", which an upstream that decodes nothing
// reads as another path.
func spelledPrefix(p, literal string) (rest string, ok bool) {
	j := 0
	for i := 0; i < len(literal); i++ {
		c := literal[i]
		if pathChar(c) {
			if j >= len(p) || p[j] != c {
				return "", false
			}
			j++
			continue
		}
		if j+2 >= len(p) || p[j] != '%' || unhex(p[j+1])<<4|unhex(p[j+2]) != int(c) {
			return "", false
		}
		j += 3
	}
	return p[j:], true
}

// pathChar reports whether c may stand unescaped in a path: '/' or an RFC
// 3986 pchar.
func pathChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("/-._~!$&'()*+,;=:@", c) >= 0
}

// unhex is the value of the hex digit c, or a value no byte has (so that a
// bad escape matches nothing).
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return 1 << 10
}

// underPrefix reports whether p, a path as forwarded (forwardedPath), is
// under prefix: any path when prefix is "" or "/"; else p must be
// unambiguous (unambiguousPath) and begin with prefix's segments spelt as
// spelledPrefix says, whole ("/v1" covers "/v1", "/v1/" and "/v1/x", not
// "/v1beta", "/v1/../admin", "/admin/%2e%2e/v1/x", "/admin%2f..%2fv1",
// "//v1" nor "/%76%31").
func underPrefix(p, prefix string) bool {
	pre := strings.TrimSuffix(prefix, "/")
	if pre == "" {
		return true
	}
	if !unambiguousPath(p) {
		return false
	}
	rest, ok := spelledPrefix(p, pre)
	return ok && (rest == "" || rest[0] == '/')
}

// pathMatches reports whether p, an unambiguous path as forwarded,
// matches a binding's path pattern: one ending in "*" matches every path
// that begins with what comes before it, any other pattern only itself;
// both spelt as spelledPrefix says.
func pathMatches(pattern, p string) bool {
	if pre, ok := strings.CutSuffix(pattern, "*"); ok {
		_, ok := spelledPrefix(p, pre)
		return ok
	}
	rest, ok := spelledPrefix(p, pattern)
	return ok && rest == ""
}
