// Package syntax holds the rules of form that the egress proxy and the
// credential proxy's model share for where a credential may go: host
// names, configured paths, header text and the headers that frame a
// request. Each function is pure and safe for concurrent use.
package syntax

import "strings"

// HostName returns a DNS name in lower case without its trailing dot,
// and whether it is a valid host name: labels of letters, digits, '-' and
// '_', 1 to 63 bytes each, 253 bytes in all, not all digits at the end
// (which would be an address).
func HostName(s string) (string, bool) {
	s = strings.TrimSuffix(strings.ToLower(s), ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	labels := strings.Split(s, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", false
		}
		for i := 0; i < len(l); i++ {
			c := l[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return "", false
			}
		}
	}
	last := labels[len(labels)-1]
	if strings.Trim(last, "0123456789") == "" {
		return "", false
	}
	return s, true
}

// PlainPath reports whether p, a path as configured (a secret's prefix, a
// binding's pattern), is absolute and has no dot segments ("." or "..").
// A configured path with one could only match requests whose path is
// ambiguous, which the proxy never gives a credential.
func PlainPath(p string) bool {
	if !strings.HasPrefix(p, "/") {
		return false
	}
	for seg := range strings.SplitSeq(p[1:], "/") {
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// HasControl reports whether s holds a control character other than tab.
func HasControl(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return true
		}
	}
	return false
}

// framingHeaders carry no credential and frame the request itself.
var framingHeaders = map[string]bool{
	"Host": true, "Content-Length": true, "Transfer-Encoding": true, "Connection": true, "Upgrade": true,
	"Te": true, "Trailer": true, "Keep-Alive": true, "Proxy-Connection": true, "Expect": true,
}

// FramingHeader reports whether the header of canonical name (see
// http.CanonicalHeaderKey) frames the request itself: no credential may
// replace it.
func FramingHeader(canonical string) bool { return framingHeaders[canonical] }
