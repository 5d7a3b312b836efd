package api_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestConsoleRoutes: the console answers GET / and its asset prefix only;
// every other path keeps the API's JSON answers.
func TestConsoleRoutes(t *testing.T) {
	e := newEnv(t, 0)
	tests := []struct {
		method, path string
		key          bool
		wantCode     int
		wantType     string
	}{
		{"GET", "/", false, 200, "text/html"},
		{"HEAD", "/", false, 200, "text/html"},
		{"GET", "/console/assets/missing.js", false, 404, "text/plain"},
		{"POST", "/", false, 404, "application/json"},
		{"GET", "/index.html", false, 404, "application/json"},
		{"GET", "/sandboxes", false, 401, "application/json"},
		{"GET", "/v1/sandboxes", true, 200, "application/json"},
		{"GET", "/healthz", false, 200, "application/json"},
	}
	for _, tt := range tests {
		req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, nil)
		if tt.key {
			req.Header.Set("OPEN-SANDBOX-API-KEY", testKey)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if ct := resp.Header.Get("Content-Type"); resp.StatusCode != tt.wantCode || !strings.HasPrefix(ct, tt.wantType) {
			t.Errorf("%s %s = %d %s, want %d %s", tt.method, tt.path, resp.StatusCode, ct, tt.wantCode, tt.wantType)
		}
	}
}
