package credproxy

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/http/httpguts"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/internal/syntax"
	"github.com/astrabox/astrabox/sandbox"
)

// Validation and normalization of the credential proxy's requests. Messages
// name fields and names, never a value.

// Limits of a Set.
const (
	maxCredentials   = 100
	maxBindings      = 100
	maxValues        = 1 << 20 // the values of all credentials together
	maxName          = 128
	maxMatchItems    = 64 // per list of a match
	maxCustomHeaders = 16
	maxMethodLen     = 32
	maxPathPattern   = 1024
)

// Defaults of a match's lists (egress-api.yaml's CredentialMatch).
var (
	defaultSchemes = []string{"https"}
	defaultPorts   = []int{443}
	defaultMethods = []string{"GET", "POST", "PUT", "PATCH", "DELETE"}
	defaultPaths   = []string{"/*"}
)

// reservedBindingHeaders frame or route the request, or describe the
// proxy's own hop: a binding may not set them.
var reservedBindingHeaders = map[string]bool{
	"Content-Type": true, "Proxy-Authorization": true, "Proxy-Authenticate": true,
	"Forwarded": true, "X-Forwarded-For": true, "X-Forwarded-Host": true, "X-Forwarded-Proto": true,
}

func invalid(format string, args ...any) error {
	return sandbox.Errorf(sandbox.CodeInvalidRequest, format, args...)
}

// checkName checks a credential's or binding's name: 1 to 128 bytes of
// UTF-8 without control characters, '/' (names are path segments of the
// API) or surrounding spaces.
func checkName(kind, name string) error {
	if name == "" || len(name) > maxName || !utf8.ValidString(name) || strings.TrimSpace(name) != name ||
		strings.ContainsRune(name, '/') || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return invalid("%s name %q must be 1 to %d bytes without control characters, '/' or surrounding spaces", kind, name, maxName)
	}
	return nil
}

// normalizeCredential checks c and returns it as stored, set at revision.
func normalizeCredential(c Credential, revision int64) (StoredCredential, error) {
	if err := checkName("credential", c.Name); err != nil {
		return StoredCredential{}, err
	}
	switch c.Source.Type {
	case "", "inline":
	default:
		return StoredCredential{}, invalid("credential %q: source type %q is not supported (want inline)", c.Name, c.Source.Type)
	}
	v := c.Source.Value
	switch {
	case v == "":
		return StoredCredential{}, invalid("credential %q: source.value must not be empty", c.Name)
	case len(v) > egress.MaxSecretValue:
		return StoredCredential{}, invalid("credential %q: source.value exceeds %d bytes", c.Name, egress.MaxSecretValue)
	case syntax.HasControl(v) || !httpguts.ValidHeaderFieldValue(v):
		return StoredCredential{}, invalid("credential %q: source.value must be header text (no control characters but tab)", c.Name)
	}
	return StoredCredential{Name: c.Name, SourceType: "inline", Value: v, Revision: revision}, nil
}

// normalizeBinding checks b and returns it as stored (defaults filled,
// lists in canonical form without repeats), set at revision.
func normalizeBinding(b CredentialBinding, revision int64) (StoredBinding, error) {
	if err := checkName("binding", b.Name); err != nil {
		return StoredBinding{}, err
	}
	m, err := normalizeMatch(b.Match)
	if err != nil {
		return StoredBinding{}, invalid("binding %q: %s", b.Name, sandbox.MessageOf(err))
	}
	a, err := normalizeAuth(b.Auth)
	if err != nil {
		return StoredBinding{}, invalid("binding %q: %s", b.Name, sandbox.MessageOf(err))
	}
	return StoredBinding{CredentialBinding: CredentialBinding{Name: b.Name, Match: m, Auth: a}, Revision: revision}, nil
}

// normalizeMatch fills the defaults and checks every list.
func normalizeMatch(in CredentialMatch) (CredentialMatch, error) {
	var m CredentialMatch
	for _, l := range []struct {
		name string
		n    int
	}{{"schemes", len(in.Schemes)}, {"ports", len(in.Ports)}, {"hosts", len(in.Hosts)}, {"methods", len(in.Methods)}, {"paths", len(in.Paths)}} {
		if l.n > maxMatchItems {
			return m, invalid("match.%s has %d entries, more than %d", l.name, l.n, maxMatchItems)
		}
	}
	for _, s := range orDefault(in.Schemes, defaultSchemes) {
		s = strings.ToLower(s)
		if s != "https" && s != "http" {
			return m, invalid("match.schemes: %q is not https or http", s)
		}
		m.Schemes = appendNew(m.Schemes, s)
	}
	for _, p := range orDefault(in.Ports, defaultPorts) {
		if p < 1 || p > 65535 {
			return m, invalid("match.ports: %d is not a port (1 to 65535)", p)
		}
		m.Ports = appendNew(m.Ports, p)
	}
	if len(in.Hosts) == 0 {
		return m, invalid("match.hosts must name at least one host")
	}
	for _, h := range in.Hosts {
		n, err := normalizeBindingHost(h)
		if err != nil {
			return m, err
		}
		m.Hosts = appendNew(m.Hosts, n)
	}
	for _, meth := range orDefault(in.Methods, defaultMethods) {
		meth = strings.ToUpper(meth)
		if meth == "" || len(meth) > maxMethodLen || !httpguts.ValidHeaderFieldName(meth) {
			return m, invalid("match.methods: %q is not an HTTP method", meth)
		}
		m.Methods = appendNew(m.Methods, meth)
	}
	for _, p := range orDefault(in.Paths, defaultPaths) {
		if err := checkPathPattern(p); err != nil {
			return m, err
		}
		m.Paths = appendNew(m.Paths, p)
	}
	return m, nil
}

// normalizeBindingHost returns a binding host in lower case without a
// trailing dot: an exact domain name, or "*." and a domain of two labels
// or more (every subdomain of it); never an address or a port.
func normalizeBindingHost(h string) (string, error) {
	rest, wild := strings.CutPrefix(h, "*.")
	name, ok := syntax.HostName(rest)
	if !ok || strings.Contains(name, "*") {
		return "", invalid("match.hosts: %q is not a domain name or a wildcard domain (*.example.com)", h)
	}
	if wild {
		if !strings.Contains(name, ".") {
			return "", invalid("match.hosts: %q: a wildcard needs a domain of two labels or more", h)
		}
		return "*." + name, nil
	}
	return name, nil
}

// checkPathPattern checks a path pattern: an absolute path, "*" only as
// its last character (a prefix), no query, fragment, control character or
// dot segment (a request with dot segments never gets a credential, see
// egress.ApplyBindings).
func checkPathPattern(p string) error {
	body := strings.TrimSuffix(p, "*")
	if !strings.HasPrefix(p, "/") || len(p) > maxPathPattern || syntax.HasControl(p) || strings.ContainsAny(body, "*?#") || !syntax.PlainPath(body) {
		return invalid("match.paths: %q must be an absolute path of at most %d bytes, without query, dot segments or '*' but as its last character", p, maxPathPattern)
	}
	return nil
}

// normalizeAuth checks an auth (each type takes only its own fields) and
// returns it with canonical header names.
func normalizeAuth(a CredentialAuth) (CredentialAuth, error) {
	switch a.Type {
	case AuthBearer, AuthBasic:
		if a.Name != "" || len(a.Headers) > 0 {
			return a, invalid("auth of type %s takes only credential", a.Type)
		}
		if err := checkName("auth credential", a.Credential); err != nil {
			return a, err
		}
		return CredentialAuth{Type: a.Type, Credential: a.Credential}, nil
	case AuthAPIKey:
		if len(a.Headers) > 0 {
			return a, invalid("auth of type apiKey takes name and credential")
		}
		name, err := bindingHeaderName(a.Name)
		if err != nil {
			return a, err
		}
		if err := checkName("auth credential", a.Credential); err != nil {
			return a, err
		}
		return CredentialAuth{Type: a.Type, Name: name, Credential: a.Credential}, nil
	case AuthCustomHeaders:
		if a.Name != "" || a.Credential != "" {
			return a, invalid("auth of type customHeaders takes only headers")
		}
		if len(a.Headers) == 0 || len(a.Headers) > maxCustomHeaders {
			return a, invalid("auth of type customHeaders needs 1 to %d headers", maxCustomHeaders)
		}
		out := CredentialAuth{Type: a.Type}
		for _, h := range a.Headers {
			name, err := bindingHeaderName(h.Name)
			if err != nil {
				return a, err
			}
			if slices.ContainsFunc(out.Headers, func(o CustomHeader) bool { return o.Name == name }) {
				return a, invalid("auth header %s is given twice", name)
			}
			if err := checkName("auth credential", h.Credential); err != nil {
				return a, err
			}
			out.Headers = append(out.Headers, CustomHeader{Name: name, Credential: h.Credential})
		}
		return out, nil
	case "":
		return a, invalid("auth.type is required (bearer, basic, apiKey or customHeaders)")
	}
	return a, invalid("auth.type %q is not bearer, basic, apiKey or customHeaders", a.Type)
}

// bindingHeaderName checks a header a binding sets and returns it
// canonical.
func bindingHeaderName(name string) (string, error) {
	if name == "" || len(name) > 256 || !httpguts.ValidHeaderFieldName(name) {
		return "", invalid("auth header name %q is not a header name", name)
	}
	c := http.CanonicalHeaderKey(name)
	if syntax.FramingHeader(c) || reservedBindingHeaders[c] {
		return "", invalid("auth header %s frames or routes the request and cannot carry a credential", c)
	}
	return c, nil
}

func orDefault[T any](l, def []T) []T {
	if len(l) == 0 {
		return def
	}
	return l
}

func appendNew[T comparable](l []T, v T) []T {
	if slices.Contains(l, v) {
		return l
	}
	return append(l, v)
}

// refs are the credential names an auth uses.
func (a CredentialAuth) refs() []string {
	if a.Type == AuthCustomHeaders {
		out := make([]string, len(a.Headers))
		for i, h := range a.Headers {
			out[i] = h.Credential
		}
		return out
	}
	return []string{a.Credential}
}

// check checks the Set as a whole: sizes, that every binding names
// credentials the Set has and hosts the policy explicitly allows
// (covered), and that no two bindings can match one request at the same
// host precedence (see egress.ApplyBindings).
func (v *Set) check(covered func(host string) bool) error {
	if len(v.Credentials) > maxCredentials {
		return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%d credentials exceed the maximum %d", len(v.Credentials), maxCredentials)
	}
	if len(v.Bindings) > maxBindings {
		return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%d bindings exceed the maximum %d", len(v.Bindings), maxBindings)
	}
	total := 0
	for _, c := range v.Credentials {
		total += len(c.Value)
	}
	if total > maxValues {
		return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "the credentials' values exceed %d bytes together", maxValues)
	}
	for _, b := range v.Bindings {
		for _, ref := range b.Auth.refs() {
			if _, ok := v.credential(ref); !ok {
				return invalid("binding %q names credential %q, which the vault does not have", b.Name, ref)
			}
		}
		for _, h := range b.Match.Hosts {
			if covered == nil || !covered(h) {
				return invalid("binding %q: host %q is not allowed by an explicit allow rule of the sandbox's egress policy (add one, e.g. with PATCH /policy)", b.Name, h)
			}
		}
	}
	for i := range v.Bindings {
		for j := i + 1; j < len(v.Bindings); j++ {
			if ambiguous(v.Bindings[i].Match, v.Bindings[j].Match) {
				return invalid("bindings %q and %q can match the same request", v.Bindings[i].Name, v.Bindings[j].Name)
			}
		}
	}
	return nil
}

// ambiguous reports whether some request can match a and b at the same
// host precedence.
func ambiguous(a, b CredentialMatch) bool {
	if !overlaps(a.Schemes, b.Schemes) || !overlaps(a.Ports, b.Ports) || !overlaps(a.Methods, b.Methods) {
		return false
	}
	pathsMeet := false
	for _, p := range a.Paths {
		for _, q := range b.Paths {
			pathsMeet = pathsMeet || patternsMeet(p, q)
		}
	}
	if !pathsMeet {
		return false
	}
	for _, x := range a.Hosts {
		for _, y := range b.Hosts {
			xr, xw := strings.CutPrefix(x, "*.")
			yr, yw := strings.CutPrefix(y, "*.")
			switch {
			case xw != yw: // an exact host wins over a wildcard
			case !xw && x == y:
				return true
			case xw && (xr == yr || strings.HasSuffix(xr, "."+yr) || strings.HasSuffix(yr, "."+xr)):
				return true
			}
		}
	}
	return false
}

func overlaps[T comparable](a, b []T) bool {
	return slices.ContainsFunc(a, func(x T) bool { return slices.Contains(b, x) })
}

// patternsMeet reports whether some path matches both patterns.
func patternsMeet(p, q string) bool {
	pp, pw := strings.CutSuffix(p, "*")
	qp, qw := strings.CutSuffix(q, "*")
	switch {
	case pw && qw:
		return strings.HasPrefix(pp, qp) || strings.HasPrefix(qp, pp)
	case pw:
		return strings.HasPrefix(q, pp)
	case qw:
		return strings.HasPrefix(p, qp)
	}
	return p == q
}
