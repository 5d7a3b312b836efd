package egress

import (
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

func TestSecretValidate(t *testing.T) {
	ok := Secret{Host: "api.example.com", Value: "sk-123"}
	tests := []struct {
		name string
		mod  func(*Secret)
		want string // "" valid; else in the error
	}{
		{"exact host", func(*Secret) {}, ""},
		{"wildcard host", func(s *Secret) { s.Host = "*.example.com" }, ""},
		{"single label", func(s *Secret) { s.Host = "intranet" }, ""},
		{"wildcard of a top-level domain", func(s *Secret) { s.Host = "*.com" }, "two labels"},
		{"inner wildcard", func(s *Secret) { s.Host = "api.*.example.com" }, "not a domain"},
		{"address", func(s *Secret) { s.Host = "192.0.2.1" }, "not a domain"},
		{"port", func(s *Secret) { s.Host = "example.com:443" }, "not a domain"},
		{"empty host", func(s *Secret) { s.Host = "" }, "not a domain"},
		{"path prefix", func(s *Secret) { s.PathPrefix = "/v1/" }, ""},
		{"relative path prefix", func(s *Secret) { s.PathPrefix = "v1" }, "absolute path"},
		{"path prefix with a query", func(s *Secret) { s.PathPrefix = "/v1?x=1" }, "absolute path"},
		{"path prefix with a dot segment", func(s *Secret) { s.PathPrefix = "/v1/../admin" }, "dot segments"},
		{"path prefix of a dot segment", func(s *Secret) { s.PathPrefix = "/v1/." }, "dot segments"},
		{"custom header", func(s *Secret) { s.Header = "X-Api-Key" }, ""},
		{"bad header", func(s *Secret) { s.Header = "X Api" }, "not a valid header name"},
		{"framing header", func(s *Secret) { s.Header = "content-length" }, "frames the request"},
		{"host header", func(s *Secret) { s.Header = "Host" }, "frames the request"},
		{"format", func(s *Secret) { s.Format = "token={value}" }, ""},
		{"format without value", func(s *Secret) { s.Format = "Bearer" }, "must hold {value}"},
		{"format with a newline", func(s *Secret) { s.Format = "{value}\r\nX-Evil: 1" }, "must hold {value}"},
		{"value with a newline", func(s *Secret) { s.Value = "sk-1\r\nX-Evil: 1" }, "header text"},
		{"value with a tab", func(s *Secret) { s.Value = "a\tb" }, ""},
		{"value too long", func(s *Secret) { s.Value = strings.Repeat("a", MaxSecretValue+1) }, "exceeds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := ok
			tt.mod(&s)
			err := s.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error with %q", err, tt.want)
			case err != nil && s.Value != "" && strings.Contains(err.Error(), s.Value):
				t.Fatalf("the error carries the value: %v", err)
			}
		})
	}
}

func TestSecretCanonicalAndHolds(t *testing.T) {
	s := Secret{Host: "API.Example.com.", Header: "x-api-key", Placeholder: "PH-0123456789abcdef"}.Canonical()
	if s.Host != "api.example.com" || s.Header != "X-Api-Key" || s.Format != "{value}" {
		t.Fatalf("Canonical = %+v", s)
	}
	auth := Secret{Placeholder: "PH-0123456789abcdef"}
	if c := auth.Canonical(); c.Header != "Authorization" || c.Format != "Bearer {value}" {
		t.Fatalf("Canonical of the defaults = %+v", c)
	}
	tests := []struct {
		header, value string
		want          bool
	}{
		{"Authorization", "Bearer PH-0123456789abcdef", true},
		{"Authorization", "PH-0123456789abcdef", false},
		{"Authorization", "Bearer PH-0123456789abcdef x", false},
		{"X-Other", "Bearer PH-0123456789abcdef", false},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set(tt.header, tt.value)
		if got := auth.Holds(h); got != tt.want {
			t.Errorf("Holds(%s: %s) = %v, want %v", tt.header, tt.value, got, tt.want)
		}
	}
	if (Secret{}).Holds(http.Header{"Authorization": {"Bearer "}}) {
		t.Error("a secret without a placeholder is held by an empty bearer")
	}
}

// TestUnderPrefix: underPrefix takes the path as the proxy forwards it
// (escaped) and holds it under a prefix only when no upstream can read it
// elsewhere.
func TestUnderPrefix(t *testing.T) {
	tests := []struct {
		path, prefix string
		want         bool
	}{
		{"/anything", "", true},
		{"/anything", "/", true},
		{"/admin/../v1/x", "", true}, // no prefix: any path
		{"/v1", "/v1", true},
		{"/v1/", "/v1", true},
		{"/v1/models", "/v1", true},
		{"/v1/models", "/v1/", true},
		{"/v1/a/b/c", "/v1/a", true},
		{"/v1/x%20y", "/v1", true},
		{"/v1/x%2e%2e", "/v1", true}, // "x..": no dot segment
		{"/v1/...", "/v1", true},
		{"/files/a%20b/x", "/files/a b", true},
		{"/files/a%20B/x", "/files/a B", true},
		{"/a:b/x", "/a:b", true},
		{"/v1beta/models", "/v1", false},
		{"/v1/../admin", "/v1", false},
		{"/v1/./models", "/v1/models", false},
		{"/v1/x/..", "/v1", false},
		{"/v1/x/.", "/v1", false},
		{"//v1/models", "/v1", false},
		{"/v1//x", "/v1", true},
		{"/v2/x", "/v1/", false},
		{"", "/v1", false},
		{"*", "/v1", false},
		{"v1/x", "/v1", false},
		{"/admin/../v1/x", "/v1", false},
		{"/admin/%2e%2e/v1/x", "/v1", false},
		{"/admin/%2E%2e/v1/x", "/v1", false},
		{"/admin/.%2E/v1/x", "/v1", false},
		{"/v1/%2e/x", "/v1", false},
		{"/v1/%2e%2e;a=b/x", "/v1", false},
		{"/v1/..;/admin", "/v1", false},
		{"/v1/.;/x", "/v1", false},
		{"/admin%2f..%2fv1/x", "/v1", false},
		{"/admin%2F..%2Fv1/x", "/v1", false},
		{"/v1/x%2fy", "/v1", false},
		{"/v1/x%5cy", "/v1", false},
		{"/v1/x%5Cy", "/v1", false},
		{"/v1/x\\y", "/v1", false},
		{"/%76%31/x", "/v1", false},
		{"/v%31/x", "/v1", false},
		{"/V1/x", "/v1", false},
		{"/files/a b/x", "/files/a b", false}, // never forwarded unescaped
		{"/files/a%2520b/x", "/files/a b", false},
		{"/a%3Ab/x", "/a:b", false},
	}
	for _, tt := range tests {
		if got := underPrefix(tt.path, tt.prefix); got != tt.want {
			t.Errorf("underPrefix(%q, %q) = %v, want %v", tt.path, tt.prefix, got, tt.want)
		}
	}
}

func TestSecretPrintsNoValue(t *testing.T) {
	s := Secret{Name: "K", Placeholder: "PH-0123456789abcdef", Value: "the-real-value", Host: "api.test"}
	var b strings.Builder
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		fmt.Fprintf(&b, f+"\n", s)
		fmt.Fprintf(&b, f+"\n", []Secret{s})
	}
	slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "secret", s)
	if out := b.String(); strings.Contains(out, s.Value) || strings.Contains(out, s.Placeholder) || !strings.Contains(out, "api.test") {
		t.Fatalf("printed: %s", out)
	}
}
