// Package egress is AstraBox's egress proxy: the only way out of a box of
// network mode limited. For each such box it serves a DNS server that
// answers only names its policy allows, and a TCP proxy that takes every
// connection the box opens (the backend redirects them to it), reads the
// name the box wants (SNI of a TLS ClientHello, Host of an HTTP request),
// decides by the policy, resolves the name itself with the host's
// resolver, refuses addresses in blocked ranges (the host, metadata,
// private ranges; after unmapping IPv4-mapped IPv6), and connects to the
// address it resolved, never the one the box dialled. Everything refused
// is logged with the box's id.
//
// This file is the policy model: targets, rules and their matching.
package egress

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/egress/internal/syntax"
	"github.com/astrabox/astrabox/sandbox"
)

// targetKind is what a rule's target names.
type targetKind uint8

const (
	kindDomain   targetKind = iota + 1 // an exact name
	kindWildcard                       // every subdomain of domain
	kindPrefix                         // an IP address or CIDR
)

// target is a parsed rule target.
type target struct {
	kind   targetKind
	domain string       // lower case, no trailing dot (kindDomain, kindWildcard: without "*.")
	prefix netip.Prefix // kindPrefix; a single address is a /32 or /128
	port   uint16       // 0: any port
}

// maxTargetLen bounds a target's text.
const maxTargetLen = 300

// parseTarget parses a rule target: "example.com", "*.example.com",
// "192.0.2.1", "192.0.2.0/24", "2001:db8::/32", each optionally followed
// by ":port" (IPv6 forms then in brackets: "[2001:db8::1]:443").
func parseTarget(s string) (target, error) {
	if s == "" || len(s) > maxTargetLen {
		return target{}, fmt.Errorf("target must be 1 to %d bytes", maxTargetLen)
	}
	host, port := s, uint16(0)
	if strings.HasPrefix(s, "[") {
		end := strings.Index(s, "]")
		if end < 0 {
			return target{}, fmt.Errorf("target %q: missing ]", s)
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			p, err := parsePort(strings.TrimPrefix(rest, ":"), rest)
			if err != nil {
				return target{}, fmt.Errorf("target %q: %w", s, err)
			}
			port = p
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 && strings.Count(s, ":") == 1 {
		p, err := parsePort(s[i+1:], s[i:])
		if err != nil {
			return target{}, fmt.Errorf("target %q: %w", s, err)
		}
		host, port = s[:i], p
	}
	if pfx, err := netip.ParsePrefix(host); err == nil {
		if pfx.Addr().Zone() != "" {
			return target{}, fmt.Errorf("target %q: zones are not allowed", s)
		}
		return target{kind: kindPrefix, prefix: unmapPrefix(pfx).Masked(), port: port}, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if a.Zone() != "" {
			return target{}, fmt.Errorf("target %q: zones are not allowed", s)
		}
		a = a.Unmap()
		return target{kind: kindPrefix, prefix: netip.PrefixFrom(a, a.BitLen()), port: port}, nil
	}
	kind := kindDomain
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		kind, host = kindWildcard, rest
	}
	name, ok := syntax.HostName(host)
	if !ok {
		return target{}, fmt.Errorf("target %q is not a domain, wildcard domain (*.example.com), IP address or CIDR", s)
	}
	return target{kind: kind, domain: name, port: port}, nil
}

func parsePort(s, context string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("bad port %q (want 1 to 65535)", context)
	}
	return uint16(n), nil
}

// unmapPrefix turns an IPv4-mapped IPv6 prefix (::ffff:a.b.c.d/n, n >= 96)
// into the IPv4 prefix it names.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// matchName reports whether the target's domain part matches name (a
// normalized name; "" matches no domain target).
func (t target) matchName(name string) bool {
	switch t.kind {
	case kindDomain:
		return name != "" && name == t.domain
	case kindWildcard:
		return len(name) > len(t.domain)+1 && strings.HasSuffix(name, "."+t.domain)
	}
	return false
}

func (t target) matchPort(port int) bool { return t.port == 0 || int(t.port) == port }

// key is the canonical text of a target, by which rules are merged and
// removed: "Example.COM." and "example.com" are one target.
func (t target) key() string {
	var s string
	switch t.kind {
	case kindDomain:
		s = t.domain
	case kindWildcard:
		s = "*." + t.domain
	case kindPrefix:
		if t.prefix.IsSingleIP() {
			s = t.prefix.Addr().String()
		} else {
			s = t.prefix.String()
		}
		if t.port != 0 && t.prefix.Addr().Is6() {
			s = "[" + s + "]"
		}
	}
	if t.port != 0 {
		s += ":" + strconv.Itoa(int(t.port))
	}
	return s
}

// rule is a compiled rule.
type rule struct {
	allow bool
	t     target
	text  string // as given
}

// Policy is a compiled, immutable egress policy. The zero Policy denies
// everything.
type Policy struct {
	rules        []rule
	defaultAllow bool
}

// Compile compiles the egress part of np (its Rules, then Allow as allow
// rules, then DefaultAction). Errors carry sandbox.CodeInvalidRequest.
func Compile(np sandbox.NetworkPolicy) (*Policy, error) {
	p := &Policy{}
	switch np.DefaultAction {
	case "", "deny":
	case "allow":
		p.defaultAllow = true
	default:
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "defaultAction must be allow or deny, got %q", np.DefaultAction)
	}
	for _, r := range EffectiveRules(np) {
		var allow bool
		switch r.Action {
		case "allow":
			allow = true
		case "deny":
		default:
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "egress rule action must be allow or deny, got %q", r.Action)
		}
		t, err := parseTarget(r.Target)
		if err != nil {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "egress rule: %v", err)
		}
		p.rules = append(p.rules, rule{allow: allow, t: t, text: r.Target})
	}
	return p, nil
}

// maxRules bounds the rules of one policy.
const maxRules = 1000

// EffectiveRules is np's rule list in the order it is evaluated: Rules,
// then Allow as allow rules.
func EffectiveRules(np sandbox.NetworkPolicy) []sandbox.NetworkRule {
	out := append([]sandbox.NetworkRule(nil), np.Rules...)
	for _, a := range np.Allow {
		out = append(out, sandbox.NetworkRule{Action: "allow", Target: a})
	}
	return out
}

// Validate checks the egress part of a limited policy (see Compile) and
// its size.
func Validate(np sandbox.NetworkPolicy) error {
	if n := len(np.Rules) + len(np.Allow); n > maxRules {
		return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "%d egress rules exceed the maximum %d", n, maxRules)
	}
	_, err := Compile(np)
	return err
}

// Merge applies OpenSandbox's PATCH /policy to np: incoming rules take
// priority over (come before) the existing ones; an existing rule for a
// target that an incoming rule names is dropped; of several incoming
// rules for one target the first wins. Allow is folded into Rules.
func Merge(np sandbox.NetworkPolicy, incoming []sandbox.NetworkRule) (sandbox.NetworkPolicy, error) {
	seen := map[string]bool{}
	var rules []sandbox.NetworkRule
	for _, r := range incoming {
		if r.Action != "allow" && r.Action != "deny" {
			return np, sandbox.Errorf(sandbox.CodeInvalidRequest, "egress rule action must be allow or deny, got %q", r.Action)
		}
		t, err := parseTarget(r.Target)
		if err != nil {
			return np, sandbox.Errorf(sandbox.CodeInvalidRequest, "egress rule: %v", err)
		}
		if k := t.key(); !seen[k] {
			seen[k] = true
			rules = append(rules, r)
		}
	}
	for _, r := range EffectiveRules(np) {
		if t, err := parseTarget(r.Target); err == nil && seen[t.key()] {
			continue
		}
		rules = append(rules, r)
	}
	out := np
	out.Rules, out.Allow = rules, nil
	return out, Validate(out)
}

// Remove applies OpenSandbox's DELETE /policy: every rule whose target is
// one of targets goes; unknown targets are ignored. Allow is folded into
// Rules.
func Remove(np sandbox.NetworkPolicy, targets []string) (sandbox.NetworkPolicy, error) {
	drop := map[string]bool{}
	for _, s := range targets {
		t, err := parseTarget(s)
		if err != nil {
			return np, sandbox.Errorf(sandbox.CodeInvalidRequest, "%v", err)
		}
		drop[t.key()] = true
	}
	var rules []sandbox.NetworkRule
	for _, r := range EffectiveRules(np) {
		if t, err := parseTarget(r.Target); err == nil && drop[t.key()] {
			continue
		}
		rules = append(rules, r)
	}
	out := np
	out.Rules, out.Allow = rules, nil
	return out, nil
}

// Verdict is the policy's decision on one connection or name.
type Verdict struct {
	Allow bool
	// Rule is the target of the rule that decided ("" for the default).
	Rule string
}

func (v Verdict) String() string {
	what := "denied"
	if v.Allow {
		what = "allowed"
	}
	if v.Rule == "" {
		return what + " by the default action"
	}
	return what + " by rule " + strconv.Quote(v.Rule)
}

// Decide decides a connection to port of ip for name (either may be
// absent: "" or the zero Addr): the first rule whose target matches name
// (domain rules) or ip (IP and CIDR rules), on its port, wins.
func (p *Policy) Decide(name string, ip netip.Addr, port int) Verdict {
	name, _ = syntax.HostName(name)
	ip = ip.Unmap()
	for _, r := range p.rules {
		if !r.t.matchPort(port) {
			continue
		}
		if r.t.matchName(name) || (r.t.kind == kindPrefix && ip.IsValid() && r.t.prefix.Contains(ip)) {
			return Verdict{Allow: r.allow, Rule: r.text}
		}
	}
	return Verdict{Allow: p.defaultAllow}
}

// Resolvable reports whether the box may resolve name: whether some port
// of name could be allowed. The first domain rule for name decides, except
// that a deny rule for one port only does not hide the name.
func (p *Policy) Resolvable(name string) Verdict {
	name, ok := syntax.HostName(name)
	if !ok {
		return Verdict{}
	}
	for _, r := range p.rules {
		if !r.t.matchName(name) {
			continue
		}
		if r.allow || r.t.port == 0 {
			return Verdict{Allow: r.allow, Rule: r.text}
		}
	}
	return Verdict{Allow: p.defaultAllow}
}

// DefaultAllow reports the policy's default action.
func (p *Policy) DefaultAllow() bool { return p.defaultAllow }

// ExplicitlyAllowed returns, for the policy np, whether a binding host
// (exact, or "*.domain") is explicitly allowed: the first domain rule that
// covers it (for a wildcard host: a wildcard rule of its domain or a
// parent) is an allow rule. The default action and IP rules do not count:
// a credential goes only where an operator named the destination.
func ExplicitlyAllowed(np sandbox.NetworkPolicy) (func(host string) bool, error) {
	p, err := Compile(np)
	if err != nil {
		return nil, err
	}
	return func(host string) bool {
		dom, wild := strings.CutPrefix(host, "*.")
		for _, r := range p.rules {
			var covers bool
			switch {
			case r.t.kind == kindPrefix:
			case wild:
				covers = r.t.kind == kindWildcard && (dom == r.t.domain || strings.HasSuffix(dom, "."+r.t.domain))
			default:
				covers = r.t.matchName(dom)
			}
			if covers {
				return r.allow
			}
		}
		return false
	}, nil
}
