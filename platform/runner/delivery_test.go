package runner

import (
	"reflect"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/sandbox"
)

func TestDeliveryPolicy(t *testing.T) {
	secrets := []egress.Secret{{Name: "A", Host: "api.example.com"}, {Name: "B", Host: "*.example.org"}, {Name: "C", Host: "api.example.com"}}
	hostsOnly := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny", Rules: []sandbox.NetworkRule{
		{Action: "allow", Target: "api.example.com"}, {Action: "allow", Target: "*.example.org"}}}
	tests := []struct {
		mode sandbox.NetworkMode
		want sandbox.NetworkPolicy
	}{
		{sandbox.NetworkUnrestricted, sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow"}},
		{sandbox.NetworkNone, hostsOnly},
		{"", hostsOnly},
		{sandbox.NetworkLimited, hostsOnly},
	}
	for _, tt := range tests {
		got := deliveryPolicy(tt.mode, secrets)
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("deliveryPolicy(%q) = %+v, want %+v", tt.mode, got, tt.want)
		}
		if err := egress.Validate(got); err != nil {
			t.Errorf("deliveryPolicy(%q) is not a valid policy: %v", tt.mode, err)
		}
	}
}

func TestDeliveryEnv(t *testing.T) {
	d := &delivery{secrets: []egress.Secret{{Name: "GH_TOKEN", Placeholder: newSecretPlaceholder(), Value: "real"}}}
	env := d.env()
	if !strings.HasPrefix(env["GH_TOKEN"], "abx-secret-") || len(env["GH_TOKEN"]) != len("abx-secret-")+48 {
		t.Fatalf("placeholder %q", env["GH_TOKEN"])
	}
	for k, v := range trust.Env() {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
	for k, v := range env {
		if v == "real" {
			t.Fatalf("env %s holds the value", k)
		}
	}
	if a, b := newSecretPlaceholder(), newSecretPlaceholder(); a == b {
		t.Fatal("placeholders repeat")
	}
}
