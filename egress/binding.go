package egress

import (
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
)

// Credential bindings: the proxy's side of a box's credential proxy
// (OpenSandbox's Credential Vault, modelled by package credproxy). A
// binding names destinations (schemes, ports, hosts, methods, paths) and
// the headers a request to them gets. Unlike a Secret it needs no placeholder: the box
// holds nothing of the credential, and the proxy sets the binding's
// headers on every request that matches, replacing whatever the box sent
// under those names. Requests that match no binding, and responses, pass
// unchanged. Over HTTPS the proxy terminates the box's TLS (with the
// server's CA) only for destinations some binding of scheme https names;
// other TLS connections pass through untouched.

// Binding is one rule of a box's credential proxy as the proxy applies it.
// Every list holds normalized values (see credproxy's validation):
// schemes "https" and "http", ports, hosts in lower case ("api.example.com",
// or "*.example.com" for every subdomain), methods in upper case, paths
// "/exact" or "/prefix*" ("/*": every path), matched against the path as
// the request is forwarded (see selectBinding and pathMatches).
type Binding struct {
	Name    string // for logs
	Schemes []string
	Ports   []int
	Hosts   []string
	Methods []string
	Paths   []string
	Headers []BindingHeader
}

// BindingHeader is a header a binding sets: Name canonical, Value the
// formatted credential ("Bearer <value>", the value itself...).
type BindingHeader struct {
	Name  string
	Value string
}

// String shows the header without its value (for %v and %+v).
func (h BindingHeader) String() string { return h.Name + ": <redacted>" }

// GoString is String for %#v.
func (h BindingHeader) GoString() string { return "egress.BindingHeader{" + h.String() + "}" }

// LogValue logs the header as String shows it.
func (h BindingHeader) LogValue() slog.Value { return slog.StringValue(h.String()) }

// String shows the binding without its values, so that printing one by
// mistake leaks nothing.
func (b Binding) String() string {
	names := make([]string, len(b.Headers))
	for i, h := range b.Headers {
		names[i] = h.Name
	}
	return fmt.Sprintf("{Name:%s Schemes:%v Ports:%v Hosts:%v Methods:%v Paths:%v Headers:%v (values redacted)}",
		b.Name, b.Schemes, b.Ports, b.Hosts, b.Methods, b.Paths, names)
}

// GoString is String for %#v.
func (b Binding) GoString() string { return "egress.Binding" + b.String() }

// LogValue logs the binding as String shows it.
func (b Binding) LogValue() slog.Value { return slog.StringValue(b.String()) }

// Host match precedences: an exact host wins over a wildcard.
const (
	noMatch       = 0
	wildcardMatch = 1
	exactMatch    = 2
)

// hostPrecedence is how well pattern (normalized) matches host (a
// normalized name): noMatch, wildcardMatch or exactMatch. "*.example.com"
// matches its subdomains, not example.com itself.
func hostPrecedence(pattern, host string) int {
	if host == "" {
		return noMatch
	}
	if rest, ok := strings.CutPrefix(pattern, "*."); ok {
		if len(host) > len(rest)+1 && strings.HasSuffix(host, "."+rest) {
			return wildcardMatch
		}
		return noMatch
	}
	if host == pattern {
		return exactMatch
	}
	return noMatch
}

// hostsPrecedence is the best precedence of any of b's hosts for host.
func (b *Binding) hostsPrecedence(host string) int {
	best := noMatch
	for _, h := range b.Hosts {
		best = max(best, hostPrecedence(h, host))
	}
	return best
}

// covers reports whether b may apply to connections of scheme to host on
// port (before the request is read: any method, any path).
func (b *Binding) covers(scheme, host string, port int) bool {
	return slices.Contains(b.Schemes, scheme) && slices.Contains(b.Ports, port) && b.hostsPrecedence(host) > noMatch
}

// selectBinding returns the binding of bs that req (sent with scheme to
// port of host, a normalized name) matches at the highest host
// precedence, or nil. ambiguous reports several at that precedence (which
// credproxy's validation refuses; the proxy then applies none).
//
// The path is the one req is forwarded with (forwardedPath); a request
// whose path is not unambiguous (unambiguousPath: dot segments, encoded
// separators, however spelt) matches no binding, whatever its patterns.
func selectBinding(bs []Binding, req *http.Request, scheme, host string, port int) (b *Binding, ambiguous bool) {
	path := forwardedPath(req)
	if !unambiguousPath(path) {
		return nil, false
	}
	method := strings.ToUpper(req.Method)
	best := noMatch
	for i := range bs {
		c := &bs[i]
		if !slices.Contains(c.Schemes, scheme) || !slices.Contains(c.Ports, port) || !slices.Contains(c.Methods, method) {
			continue
		}
		if !slices.ContainsFunc(c.Paths, func(p string) bool { return pathMatches(p, path) }) {
			continue
		}
		switch prec := c.hostsPrecedence(host); {
		case prec == noMatch || prec < best:
		case prec > best:
			b, best, ambiguous = c, prec, false
		default:
			ambiguous = true
		}
	}
	if ambiguous {
		return nil, true
	}
	return b, false
}

// ApplyBindings sets, on req sent with scheme ("https" or "http") to port
// of host (a normalized name: the name the connection was allowed and, for
// TLS, verified for), the headers of the binding of bs it matches; it
// returns that binding's name ("" when none applies) and whether several
// bindings matched equally (then none applies).
func ApplyBindings(req *http.Request, scheme, host string, port int, bs []Binding) (name string, ambiguous bool) {
	b, ambiguous := selectBinding(bs, req, scheme, host, port)
	if b == nil {
		return "", ambiguous
	}
	for _, h := range b.Headers {
		req.Header.Del(h.Name)
		req.Header.Set(h.Name, h.Value)
	}
	return b.Name, false
}

// SetBindings replaces the credential proxy bindings the proxy applies to
// the requests of box id (nil or empty: none). They are kept by id, apart
// from the box's proxy state, so that they hold whenever the box is behind
// one of the Manager's gates (also when a backend opens its gate again,
// or before it has); the caller clears them when the box is deleted.
func (m *Manager) SetBindings(id string, bs []Binding) {
	if len(bs) == 0 {
		m.bindings.Delete(id)
		return
	}
	cp := make([]Binding, len(bs))
	for i, b := range bs {
		b.Schemes, b.Ports, b.Hosts = slices.Clone(b.Schemes), slices.Clone(b.Ports), slices.Clone(b.Hosts)
		b.Methods, b.Paths, b.Headers = slices.Clone(b.Methods), slices.Clone(b.Paths), slices.Clone(b.Headers)
		cp[i] = b
	}
	m.bindings.Store(id, cp)
}

// BindingNames returns the names of the bindings the proxy applies for
// box id (none: nil), in order; never their values.
func (m *Manager) BindingNames(id string) []string {
	var out []string
	for _, b := range m.bindingsOf(id) {
		out = append(out, b.Name)
	}
	return out
}

// bindingsOf returns box id's bindings (nil: none). The slice is shared:
// callers only read it.
func (m *Manager) bindingsOf(id string) []Binding {
	if v, ok := m.bindings.Load(id); ok {
		return v.([]Binding)
	}
	return nil
}

// bindingCovers reports whether some binding of the box may apply to a
// connection of scheme to name on port.
func (b *Box) bindingCovers(scheme, name string, port int) bool {
	bs := b.m.bindingsOf(b.id)
	for i := range bs {
		if bs[i].covers(scheme, name, port) {
			return true
		}
	}
	return false
}
