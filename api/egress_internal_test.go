package api

import (
	"testing"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/lifecycle"
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

func TestCredentialProxyCreate(t *testing.T) {
	allow := func(s string) wire.NetworkRule { return wire.NetworkRule{Action: "allow", Target: s} }
	deny := func(s string) wire.NetworkRule { return wire.NetworkRule{Action: "deny", Target: s} }
	on := &wire.CredentialProxyConfig{Enabled: true}
	tests := []struct {
		name  string
		req   CreateSandboxRequest
		dflt  string // the limited policy's default action
		rules int
		code  sandbox.Code
	}{
		{"allow with allow rules stays limited", CreateSandboxRequest{CredentialProxy: on,
			NetworkPolicy: &NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{allow("api.test")}}}, "allow", 1, ""},
		{"allow alone", CreateSandboxRequest{CredentialProxy: on, NetworkPolicy: &NetworkPolicy{DefaultAction: "allow"}}, "allow", 0, ""},
		{"deny with rules", CreateSandboxRequest{CredentialProxy: on,
			NetworkPolicy: &NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{allow("api.test")}}}, "deny", 1, ""},
		{"allow with deny rules", CreateSandboxRequest{CredentialProxy: on,
			NetworkPolicy: &NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{deny("bad.test"), allow("api.test")}}}, "allow", 2, ""},
		{"an empty policy is limited deny", CreateSandboxRequest{CredentialProxy: on, NetworkPolicy: &NetworkPolicy{}}, "deny", 0, ""},
		{"no policy", CreateSandboxRequest{CredentialProxy: on}, "", 0, sandbox.CodeInvalidRequest},
		{"network none", CreateSandboxRequest{CredentialProxy: on, NetworkPolicy: &NetworkPolicy{DefaultAction: "deny"},
			Extensions: map[string]string{"network": "none"}}, "", 0, sandbox.CodeInvalidRequest},
		{"a bad rule", CreateSandboxRequest{CredentialProxy: on,
			NetworkPolicy: &NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{allow("not a name")}}}, "", 0, sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		out, err := toCreateRequest(tt.req, lifecycle.Limits{})
		if tt.code != "" {
			if sandbox.CodeOf(err) != tt.code {
				t.Errorf("%s: error %v, want %s", tt.name, err, tt.code)
			}
			continue
		}
		if err != nil || !out.CredentialProxy || out.Network == nil || out.Network.Mode != sandbox.NetworkLimited ||
			out.Network.DefaultAction != tt.dflt || len(out.Network.Rules) != tt.rules {
			t.Errorf("%s: %+v %+v %v, want limited %q with %d rules", tt.name, out, out.Network, err, tt.dflt, tt.rules)
		}
	}
	// Disabled, it changes nothing.
	out, err := toCreateRequest(CreateSandboxRequest{CredentialProxy: &wire.CredentialProxyConfig{}, NetworkPolicy: &NetworkPolicy{DefaultAction: "allow"}}, lifecycle.Limits{})
	if err != nil || out.CredentialProxy || out.Network.Mode != sandbox.NetworkUnrestricted {
		t.Errorf("disabled: %+v %v", out, err)
	}
}
