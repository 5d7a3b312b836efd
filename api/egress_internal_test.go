package api

import (
	"testing"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func TestToNetworkPolicy(t *testing.T) {
	allow := func(s string) wire.NetworkRule { return wire.NetworkRule{Action: "allow", Target: s} }
	deny := func(s string) wire.NetworkRule { return wire.NetworkRule{Action: "deny", Target: s} }
	tests := []struct {
		name   string
		in     NetworkPolicy
		mode   sandbox.NetworkMode
		dflt   string
		rules  int
		errOut sandbox.Code
	}{
		{"empty", NetworkPolicy{}, sandbox.NetworkNone, "", 0, ""},
		{"allow all", NetworkPolicy{DefaultAction: "allow"}, sandbox.NetworkUnrestricted, "", 0, ""},
		{"allow with allow rules", NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{allow("a.test")}}, sandbox.NetworkUnrestricted, "", 0, ""},
		{"allow with a deny rule", NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{deny("bad.test")}}, sandbox.NetworkLimited, "allow", 1, ""},
		{"deny alone", NetworkPolicy{DefaultAction: "deny"}, sandbox.NetworkLimited, "deny", 0, ""},
		{"deny with rules", NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{allow("pypi.org"), allow("*.pythonhosted.org"), allow("10.0.0.0/8:5432")}}, sandbox.NetworkLimited, "deny", 3, ""},
		{"rules default to deny", NetworkPolicy{Egress: []wire.NetworkRule{allow("pypi.org")}}, sandbox.NetworkLimited, "deny", 1, ""},
		{"bad action", NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{{Action: "maybe", Target: "a.test"}}}, "", "", 0, sandbox.CodeInvalidRequest},
		{"bad target", NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{allow("no such thing!")}}, "", "", 0, sandbox.CodeInvalidRequest},
		{"bad default", NetworkPolicy{DefaultAction: "maybe"}, "", "", 0, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		np, err := toNetworkPolicy(tt.in)
		if tt.errOut != "" {
			if sandbox.CodeOf(err) != tt.errOut {
				t.Errorf("%s: error %v, want %s", tt.name, err, tt.errOut)
			}
			continue
		}
		if err != nil || np.Mode != tt.mode || np.DefaultAction != tt.dflt || len(np.Rules) != tt.rules {
			t.Errorf("%s: %+v %v, want mode %s default %q and %d rules", tt.name, np, err, tt.mode, tt.dflt, tt.rules)
		}
	}
}
