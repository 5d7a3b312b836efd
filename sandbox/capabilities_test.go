package sandbox

import (
	"strings"
	"testing"
)

func TestCapabilitiesCheck(t *testing.T) {
	docker := Capabilities{Isolation: IsolationContainer, NetworkModes: []NetworkMode{NetworkNone, NetworkUnrestricted}, Pause: true,
		Runtimes: []Runtime{{Name: "runc", Isolation: IsolationContainer}, {Name: "runsc", Isolation: IsolationSandboxed}}}
	native := Capabilities{Isolation: IsolationContainer, NetworkModes: []NetworkMode{NetworkNone}, Pause: true, PTY: true}
	tests := []struct {
		name    string
		caps    Capabilities
		spec    Spec
		refused string // a word of the refusal; "" when accepted
	}{
		{"nothing asked", native, Spec{}, ""},
		{"an offered capability", native, Spec{Capabilities: []Capability{CapPause, CapPTY}}, ""},
		{"a missing capability", native, Spec{Capabilities: []Capability{CapGPU}}, "gpu"},
		{"a network mode implies its capability", native, Spec{Network: NetworkPolicy{Mode: NetworkUnrestricted}}, "network-unrestricted"},
		{"an offered network mode", docker, Spec{Network: NetworkPolicy{Mode: NetworkUnrestricted}}, ""},
		{"an offered runtime", docker, Spec{Runtime: "runsc"}, ""},
		{"a runtime not offered", docker, Spec{Runtime: "kata-runtime"}, "runc, runsc"},
		{"a runtime where there is no choice", native, Spec{Runtime: "runc"}, "no choice"},
		{"a credential proxy through the server's egress proxy", Capabilities{NetworkModes: []NetworkMode{NetworkLimited}, EgressProxy: true},
			Spec{Network: NetworkPolicy{Mode: NetworkLimited}, CredentialProxy: true}, ""},
		{"a credential proxy where limited is another's", Capabilities{NetworkModes: []NetworkMode{NetworkLimited}},
			Spec{Network: NetworkPolicy{Mode: NetworkLimited}, CredentialProxy: true}, "egress proxy"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.caps.Check(tc.spec)
			switch {
			case tc.refused == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.refused != "" && (CodeOf(err) != CodeCapability || !strings.Contains(err.Error(), tc.refused)):
				t.Fatalf("err = %v, want %s naming %q", err, CodeCapability, tc.refused)
			}
		})
	}
}

func TestSpecValidateRuntime(t *testing.T) {
	for _, tc := range []struct {
		runtime string
		ok      bool
	}{{"", true}, {"runc", true}, {"io.containerd.runsc.v1", true}, {"kata-runtime", true}, {"a b", false}, {"../x", false}, {strings.Repeat("r", 65), false}} {
		s := Spec{Runtime: tc.runtime}
		if err := s.Validate(); (err == nil) != tc.ok {
			t.Errorf("runtime %q: %v, want ok=%v", tc.runtime, err, tc.ok)
		}
	}
}
