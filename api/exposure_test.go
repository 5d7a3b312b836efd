package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/sandbox"
)

// TestWhatAnswersWithoutAKey checks issue #12's exposure item: /healthz
// is open; /readyz is open but tells an unauthenticated client only
// whether the server is ready (no backends, instances or store detail);
// /metrics is open by default and needs the key with MetricsRequireKey.
func TestWhatAnswersWithoutAKey(t *testing.T) {
	open := newEnv(t, 0)
	locked := newEnvConfig(t, 0, nil, func(c *server.Config) { c.MetricsRequireKey = true })
	tests := []struct {
		name   string
		e      *env
		path   string
		key    bool
		status int
		want   []string // in the body
		absent []string // not in the body
	}{
		{"healthz open", locked, "/healthz", false, 200, []string{`"ok"`}, nil},
		{"readyz without key", open, "/readyz", false, 200, []string{`{"ready":true}`}, []string{"backends", "instances", "store", "process"}},
		{"readyz with key", open, "/readyz", true, 200, []string{`"ready":true`, `"backends"`, `"instances"`, `"store"`}, nil},
		{"metrics open by default", open, "/metrics", false, 200, []string{"astrabox_sandboxes"}, nil},
		{"metrics without key when required", locked, "/metrics", false, 401, []string{string(sandbox.CodeUnauthorized)}, []string{"astrabox_"}},
		{"metrics with key when required", locked, "/metrics", true, 200, []string{"astrabox_sandboxes", "astrabox_api_errors_total"}, nil},
		{"readyz without key when metrics are locked", locked, "/readyz", false, 200, []string{`{"ready":true}`}, []string{"backends"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, tc.e.srv.URL+tc.path, nil)
			if tc.key {
				req.Header.Set(api.HeaderAPIKey, testKey)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body := strings.TrimSpace(string(b))
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %.300s", resp.StatusCode, tc.status, body)
			}
			for _, w := range tc.want {
				if !strings.Contains(body, w) {
					t.Errorf("body lacks %q: %.300s", w, body)
				}
			}
			for _, a := range tc.absent {
				if strings.Contains(body, a) {
					t.Errorf("body has %q: %.300s", a, body)
				}
			}
		})
	}
	t.Run("a wrong key is no key", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, open.srv.URL+"/readyz", nil)
		req.Header.Set(api.HeaderAPIKey, "wrong")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body) != 1 {
			t.Fatalf("body %v, %v; want only ready", body, err)
		}
	})
}
