package egress

import (
	"net/http"
	"testing"
)

func TestScrubHeaders(t *testing.T) {
	secrets := []Secret{{Name: "gh", Placeholder: "abx-secret-0001", Value: "ghp_realvalue123"}, {Name: "short", Placeholder: "p", Value: "abc"}}
	bindings := []Binding{{Name: "api", Headers: []BindingHeader{{Name: "Authorization", Value: "Bearer sk-live-7777777"}}}}
	for _, tt := range []struct {
		name  string
		in    http.Header
		want  http.Header
		count int
	}{
		{"nothing to scrub", http.Header{"X-A": {"plain"}}, http.Header{"X-A": {"plain"}}, 0},
		{"a secret's value becomes its placeholder",
			http.Header{"X-Echo": {"token ghp_realvalue123 seen"}}, http.Header{"X-Echo": {"token abx-secret-0001 seen"}}, 1},
		{"a binding's whole header value",
			http.Header{"X-Echo-Auth": {"Bearer sk-live-7777777"}}, http.Header{"X-Echo-Auth": {withheldMark}}, 1},
		{"a binding's token alone",
			http.Header{"X-Token": {"sk-live-7777777"}}, http.Header{"X-Token": {withheldMark}}, 1},
		{"values shorter than the bound stay", http.Header{"X-A": {"abc abc"}}, http.Header{"X-A": {"abc abc"}}, 0},
		{"every value of a header",
			http.Header{"Set-Cookie": {"a=ghp_realvalue123", "b=1"}}, http.Header{"Set-Cookie": {"a=abx-secret-0001", "b=1"}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if n := scrubHeaders(tt.in, secrets, bindings); n != tt.count {
				t.Errorf("changed %d values, want %d", n, tt.count)
			}
			for k, vs := range tt.want {
				for i, v := range vs {
					if tt.in[k][i] != v {
						t.Errorf("%s[%d] = %q, want %q", k, i, tt.in[k][i], v)
					}
				}
			}
		})
	}
}
