package docker

import (
	"context"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

func TestRegistryHost(t *testing.T) {
	for ref, want := range map[string]string{
		"debian":                           defaultRegistry,
		"library/debian:12":                defaultRegistry,
		"opensandbox/code-interpreter":     defaultRegistry,
		"localhost/x":                      "localhost",
		"localhost:5000/x":                 "localhost:5000",
		"127.0.0.1:5000/x:latest":          "127.0.0.1:5000",
		"registry.example.com/team/img:v1": "registry.example.com",
		"[::1]:5000/x":                     "[::1]:5000",
	} {
		if got := registryHost(ref); got != want {
			t.Errorf("registryHost(%q) = %q, want %q", ref, got, want)
		}
	}
}

func TestCheckRegistry(t *testing.T) {
	tests := []struct {
		ref     string
		allowed []string
		code    sandbox.Code // "" for allowed
	}{
		{"127.0.0.1:5000/x:latest", nil, sandbox.CodeInvalidRequest},
		{"localhost:5000/x", nil, sandbox.CodeInvalidRequest}, // resolves to loopback
		{"169.254.169.254/latest/meta", nil, sandbox.CodeInvalidRequest},
		{"10.1.2.3:443/x", nil, sandbox.CodeInvalidRequest},
		{"[::1]:5000/x", nil, sandbox.CodeInvalidRequest},
		{"[::ffff:127.0.0.1]:5000/x", nil, sandbox.CodeInvalidRequest},
		{"[fd00::1]/x", nil, sandbox.CodeInvalidRequest},
		{"127.0.0.1:5000/x", []string{"127.0.0.1:5000"}, ""},
		{"localhost:5000/x", []string{"localhost:5000"}, ""},
		{"127.0.0.1:5001/x", []string{"127.0.0.1:5000"}, sandbox.CodeInvalidRequest},
		{"93.184.215.14:5000/x", nil, ""},
		{"no-such-registry.invalid/x", nil, sandbox.CodeImageNotFound},
	}
	for _, tc := range tests {
		err := checkRegistry(context.Background(), tc.ref, tc.allowed, nil)
		if got := sandbox.CodeOf(err); (err == nil) != (tc.code == "") || (err != nil && got != tc.code) {
			t.Errorf("checkRegistry(%q, %v) = %v, want code %q", tc.ref, tc.allowed, err, tc.code)
		}
	}
}

func TestPullFailureKeepsTheRegistrysAnswerOut(t *testing.T) {
	err := pullFailure("127.0.0.1:5000/x", errorString(`Error response from daemon: unknown: <html>secret-internal-page token=abc</html>`))
	if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "token") {
		t.Fatalf("the registry's answer reached the client: %v", err)
	}
	if sandbox.CodeOf(err) != sandbox.CodeImageNotFound {
		t.Fatalf("code %s", sandbox.CodeOf(err))
	}
}

type errorString string

func (e errorString) Error() string { return string(e) }
