package modelapi

import (
	"net/http/httptest"
	"testing"
)

// TestAllowedPath: the default wire's routes pass, as forwarded; anything
// else, or a path an endpoint could read differently, is refused.
func TestAllowedPath(t *testing.T) {
	for _, tc := range []struct {
		method, target, want string // want "" for a refusal
	}{
		{"POST", "/v1/chat/completions", "/chat/completions"},
		{"GET", "/v1/models", "/models"},
		{"GET", "/v1/models/org/m:7b", "/models/org/m:7b"},
		{"GET", "/v1/models/", ""},
		{"POST", "/v1/files", ""},
		{"POST", "/v1/chat/%2e%2e/completions", ""},
		{"POST", "/v1//chat/completions", ""},
		{"POST", "/v2/chat/completions", ""},
	} {
		req := httptest.NewRequest(tc.method, "http://box"+tc.target, nil)
		got, err := AllowedPath(req, Routes("openai-chat"))
		if (err == nil) != (tc.want != "") || got != tc.want {
			t.Errorf("%s %s: %q, %v; want %q", tc.method, tc.target, got, err, tc.want)
		}
	}
	if len(Routes("no-such-api")) != len(Routes("")) {
		t.Error("an unknown API does not get the default wire's routes")
	}
}
