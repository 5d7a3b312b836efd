package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

func TestHandler(t *testing.T) {
	built := fstest.MapFS{
		"index.html":         {Data: []byte(`<!doctype html><script type="module" src="/console/assets/app-1a2b.js"></script>`)},
		"assets/app-1a2b.js": {Data: []byte(`console.log("app")`)},
		"favicon.svg":        {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
	}
	tests := []struct {
		name       string
		fsys       fstest.MapFS
		method     string
		path       string
		wantStatus int
		wantBody   string // a substring
		wantType   string // a prefix of Content-Type
		wantCache  string
	}{
		{"index", built, "GET", "/", 200, "/console/assets/app-1a2b.js", "text/html", "no-cache"},
		{"head index", built, "HEAD", "/", 200, "", "text/html", "no-cache"},
		{"hashed asset", built, "GET", "/console/assets/app-1a2b.js", 200, `console.log("app")`, "text/javascript", "public, max-age=31536000, immutable"},
		{"other asset", built, "GET", "/console/favicon.svg", 200, "<svg", "image/svg+xml", "no-cache"},
		{"missing asset", built, "GET", "/console/assets/nope.js", 404, "not found", "text/plain", ""},
		{"directory", built, "GET", "/console/assets", 404, "not found", "text/plain", ""},
		{"index under the prefix", built, "GET", "/console/index.html", 404, "not found", "text/plain", ""},
		{"escape", built, "GET", "/console/../console.go", 404, "not found", "text/plain", ""},
		{"other path", built, "GET", "/elsewhere", 404, "not found", "text/plain", ""},
		{"post", built, "POST", "/", 405, "method not allowed", "text/plain", ""},
		{"fallback", fstest.MapFS{}, "GET", "/", 200, "built without the web console", "text/html", "no-cache"},
		{"fallback asset", fstest.MapFS{}, "GET", "/console/assets/app.js", 404, "not found", "text/plain", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			New(tt.fsys).ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, nil))
			if rec.Code != tt.wantStatus {
				t.Fatalf("%s %s = %d %q, want %d", tt.method, tt.path, rec.Code, rec.Body, tt.wantStatus)
			}
			if !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("body %q, want it to contain %q", rec.Body, tt.wantBody)
			}
			if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, tt.wantType) {
				t.Errorf("Content-Type %q, want %s...", ct, tt.wantType)
			}
			if cc := rec.Header().Get("Cache-Control"); cc != tt.wantCache {
				t.Errorf("Cache-Control %q, want %q", cc, tt.wantCache)
			}
			if rec.Header().Get("X-Content-Type-Options") != "nosniff" {
				t.Error("no X-Content-Type-Options: nosniff")
			}
		})
	}
}

// TestIndexPolicy: the page may load nothing from another origin, start
// no worker (a service worker least of all), and shares no window with
// the pages it opens.
func TestIndexPolicy(t *testing.T) {
	rec := httptest.NewRecorder()
	New(fstest.MapFS{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	csp := rec.Header().Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "frame-ancestors 'none'", "worker-src 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if got := rec.Header().Get("Cross-Origin-Opener-Policy"); got != "same-origin" {
		t.Errorf("Cross-Origin-Opener-Policy %q, want same-origin", got)
	}
	if got := rec.Header().Get("Service-Worker-Allowed"); got != "" {
		t.Errorf("Service-Worker-Allowed %q on the console's page", got)
	}
}

// TestEmbedded: the embedded console (a build or the placeholder) serves
// its index.
func TestEmbedded(t *testing.T) {
	rec := httptest.NewRecorder()
	Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	want := "built without the web console"
	if Built() {
		want = AssetPrefix + "assets/"
	}
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), want) {
		t.Fatalf("GET / = %d %q, want 200 with %q (built: %v)", rec.Code, rec.Body, want, Built())
	}
}
