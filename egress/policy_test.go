package egress

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

func TestParseTarget(t *testing.T) {
	tests := []struct {
		in, key string // key "" = invalid
	}{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"*.example.com", "*.example.com"},
		{"example.com:443", "example.com:443"},
		{"*.example.com:8443", "*.example.com:8443"},
		{"192.0.2.1", "192.0.2.1"},
		{"192.0.2.1:22", "192.0.2.1:22"},
		{"192.0.2.0/24", "192.0.2.0/24"},
		{"192.0.2.7/24", "192.0.2.0/24"},
		{"10.0.0.0/8:5432", "10.0.0.0/8:5432"},
		{"2001:db8::1", "2001:db8::1"},
		{"[2001:db8::1]:443", "[2001:db8::1]:443"},
		{"[2001:db8::/32]:443", "[2001:db8::/32]:443"},
		{"::ffff:192.0.2.1", "192.0.2.1"},
		{"::ffff:192.0.2.0/120", "192.0.2.0/24"},
		{"under_score.example", "under_score.example"},
		{"", ""},
		{"*", ""},
		{"*.", ""},
		{"a.*.example.com", ""},
		{"exa mple.com", ""},
		{"example.com:0", ""},
		{"example.com:65536", ""},
		{"example.com:http", ""},
		{"-bad.example.com", ""},
		{"1.2.3", ""}, // numeric last label: not a name
		{"[2001:db8::1", ""},
		{"fe80::1%eth0", ""},
		{"a..b", ""},
	}
	for _, tt := range tests {
		tg, err := parseTarget(tt.in)
		if tt.key == "" {
			if err == nil {
				t.Errorf("parseTarget(%q) = %+v, want an error", tt.in, tg)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseTarget(%q): %v", tt.in, err)
			continue
		}
		if got := tg.key(); got != tt.key {
			t.Errorf("parseTarget(%q).key() = %q, want %q", tt.in, got, tt.key)
		}
	}
}

func rules(rs ...string) []sandbox.NetworkRule {
	var out []sandbox.NetworkRule
	for i := 0; i < len(rs); i += 2 {
		out = append(out, sandbox.NetworkRule{Action: rs[i], Target: rs[i+1]})
	}
	return out
}

func TestDecide(t *testing.T) {
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: rules(
		"deny", "bad.example.com",
		"allow", "*.example.com",
		"allow", "pypi.org:443",
		"allow", "203.0.113.0/24",
		"deny", "198.51.100.7",
		"allow", "198.51.100.0/24:22",
	), Allow: []string{"files.test"}}
	p, err := Compile(np)
	if err != nil {
		t.Fatal(err)
	}
	ip := netip.MustParseAddr
	tests := []struct {
		name  string
		ip    string
		port  int
		allow bool
	}{
		{"a.example.com", "", 443, true},
		{"A.B.Example.Com.", "", 80, true},
		{"example.com", "", 443, false}, // a wildcard is subdomains only
		{"bad.example.com", "", 443, false},
		{"pypi.org", "", 443, true},
		{"pypi.org", "", 80, false},
		{"files.test", "", 8080, true},
		{"", "203.0.113.9", 80, true},
		{"", "::ffff:203.0.113.9", 80, true},
		{"", "198.51.100.7", 22, false},
		{"", "198.51.100.8", 22, true},
		{"", "198.51.100.8", 23, false},
		{"other.org", "", 443, false},
		{"other.org", "203.0.113.1", 443, true}, // the address it resolved to is allowed
		{"", "", 0, false},
	}
	for _, tt := range tests {
		var a netip.Addr
		if tt.ip != "" {
			a = ip(tt.ip)
		}
		if v := p.Decide(tt.name, a, tt.port); v.Allow != tt.allow {
			t.Errorf("Decide(%q, %s, %d) = %v, want allow %v", tt.name, tt.ip, tt.port, v, tt.allow)
		}
	}
	for name, want := range map[string]bool{"pypi.org": true, "x.example.com": true, "bad.example.com": false, "nope.test": false, "files.test": true, "": false} {
		if v := p.Resolvable(name); v.Allow != want {
			t.Errorf("Resolvable(%q) = %v, want %v", name, v, want)
		}
	}
	allowAll, _ := Compile(sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow", Rules: rules("deny", "evil.test")})
	if !allowAll.Decide("x.test", netip.Addr{}, 1).Allow || allowAll.Decide("evil.test", netip.Addr{}, 1).Allow {
		t.Error("default allow with a deny rule decides wrong")
	}
}

func TestCompileRejects(t *testing.T) {
	for _, np := range []sandbox.NetworkPolicy{
		{Rules: rules("permit", "a.test")},
		{Rules: rules("allow", "not a name")},
		{DefaultAction: "maybe"},
	} {
		if _, err := Compile(np); err == nil {
			t.Errorf("Compile(%+v) accepted", np)
		}
	}
}

func TestMergeAndRemove(t *testing.T) {
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Rules: rules("allow", "a.test", "allow", "b.test"), Allow: []string{"c.test"}}
	got, err := Merge(np, rules("deny", "B.test.", "allow", "d.test", "deny", "d.test"))
	if err != nil {
		t.Fatal(err)
	}
	want := rules("deny", "B.test.", "allow", "d.test", "allow", "a.test", "allow", "c.test")
	if !reflect.DeepEqual(got.Rules, want) || got.Allow != nil {
		t.Fatalf("Merge = %+v, want %+v", got.Rules, want)
	}
	got, err = Remove(got, []string{"a.test", "nothere.test", "b.test"})
	if err != nil {
		t.Fatal(err)
	}
	if want := rules("allow", "d.test", "allow", "c.test"); !reflect.DeepEqual(got.Rules, want) {
		t.Fatalf("Remove = %+v, want %+v", got.Rules, want)
	}
	if _, err := Merge(np, rules("allow", "bad target!")); err == nil {
		t.Fatal("Merge accepted a bad target")
	}
	if _, err := Merge(np, rules("maybe", "x.test")); err == nil {
		t.Fatal("Merge accepted a bad action")
	}
}

func FuzzParseTarget(f *testing.F) {
	for _, s := range []string{"example.com", "*.a.b:443", "10.0.0.0/8:22", "[::1]:80", "::ffff:1.2.3.4/120", "a..b", "*"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := parseTarget(s)
		if err != nil {
			return
		}
		// The canonical form parses to the same target.
		again, err := parseTarget(tg.key())
		if err != nil {
			t.Fatalf("key %q of %q does not parse: %v", tg.key(), s, err)
		}
		if again != tg {
			t.Fatalf("parseTarget(key(%q)) = %+v, want %+v", s, again, tg)
		}
		p := &Policy{rules: []rule{{allow: true, t: tg, text: s}}}
		_ = p.Decide(tg.domain, tg.prefix.Addr(), int(tg.port))
		_ = p.Resolvable(tg.domain)
	})
}

func TestExplicitlyAllowed(t *testing.T) {
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow", Rules: []sandbox.NetworkRule{
		{Action: "deny", Target: "bad.example.com"},
		{Action: "allow", Target: "*.example.com"},
		{Action: "allow", Target: "api.test:443"},
		{Action: "allow", Target: "10.0.0.0/8"},
		{Action: "deny", Target: "*.blocked.org"},
		{Action: "allow", Target: "*.org"},
	}}
	covered, err := ExplicitlyAllowed(np)
	if err != nil {
		t.Fatal(err)
	}
	for host, want := range map[string]bool{
		"api.example.com":    true,
		"bad.example.com":    false, // denied before the wildcard
		"example.com":        false, // a wildcard is not its apex
		"*.example.com":      true,
		"*.sub.example.com":  true,
		"api.test":           true, // a rule of one port still names it
		"other.test":         false,
		"*.test":             false,
		"x.blocked.org":      false,
		"*.blocked.org":      false,
		"*.fine.org":         true,
		"unlisted.anywhere":  false, // the default action does not count
		"*.unlisted.example": false,
	} {
		if got := covered(host); got != want {
			t.Errorf("%s: %v, want %v", host, got, want)
		}
	}
}
