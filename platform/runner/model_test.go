package runner

import (
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/modelapi"
)

const (
	testModelKey    = "sk-real-model-key-0123456789abcdef"
	testPlaceholder = "astrabox-placeholder-0123456789abcdef"
)

// upstreamLog records the requests an upstream model endpoint saw.
type upstreamLog struct {
	mu   sync.Mutex
	reqs []string // "METHOD escaped-path"
}

func (l *upstreamLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reqs = append(l.reqs, r.Method+" "+r.URL.EscapedPath())
}

func (l *upstreamLog) all() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.reqs...)
}

// newTestModelProxy returns a model path in front of h (the endpoint,
// served under /v1) and the upstream's request log.
func newTestModelProxy(t *testing.T, h http.HandlerFunc) (*modelProxy, *upstreamLog) {
	t.Helper()
	log := &upstreamLog{}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.add(r)
		h(w, r)
	}))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	mp := &modelProxy{
		secrets: []egress.Secret{{Name: "model", Placeholder: testPlaceholder, Value: testModelKey, Host: u.Hostname(), Format: "Bearer {value}"}},
		routes:  modelapi.Routes("openai-chat"),
		base:    up.URL + "/v1",
		host:    u.Hostname(),
		client:  up.Client(),
		retries: lifecycle.DefaultModelRetries,
		pause:   retryPause,
		notes:   make(chan modelNote, 64),
		log:     slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	return mp, log
}

// boxRequest sends what a box would: the placeholder as its key, on rawPath
// (sent as written, escapes and dot segments kept).
func boxRequest(mp *modelProxy, method, rawPath, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "http://127.0.0.1/", strings.NewReader(body))
	req.URL.Opaque = ""
	u, err := url.ParseRequestURI(rawPath)
	if err == nil {
		req.URL.Path, req.URL.RawPath = u.Path, u.RawPath
	} else {
		req.URL.Path, req.URL.RawPath = rawPath, ""
	}
	req.Header.Set("Authorization", "Bearer "+testPlaceholder)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	mp.ServeHTTP(rec, req)
	return rec
}

// TestModelPathRoutes: only the model API's routes reach the endpoint, and
// a path is judged exactly as it would be forwarded.
func TestModelPathRoutes(t *testing.T) {
	for _, tc := range []struct {
		method, path string
		pass         bool
	}{
		{"POST", "/v1/chat/completions", true},
		{"GET", "/v1/models", true},
		{"GET", "/v1/models/gpt-4o-mini", true},
		{"GET", "/v1/models/org/model:7b", true},
		{"GET", "/v1/chat/completions", false},
		{"DELETE", "/v1/files/file-1", false},
		{"POST", "/v1/files", false},
		{"GET", "/v1/models/", false},
		{"POST", "/v1/../../admin/key/generate", false},
		{"POST", "/v1/chat/completions/../../admin", false},
		{"POST", "/v1/chat/%2e%2e/completions", false},
		{"POST", "/v1/chat%2fcompletions", false},
		{"GET", "/v1/models/x%2f..%2f..%2fadmin", false},
		{"GET", "/v1/models/..\\admin", false},
		{"POST", "/v1//chat/completions", false},
		{"POST", "/v1/./chat/completions", false},
		{"POST", "/admin", false},
		{"POST", "/v1x/chat/completions", false},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			mp, log := newTestModelProxy(t, func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"ok":true}`)
			})
			rec := boxRequest(mp, tc.method, tc.path, `{}`)
			reached := len(log.all()) > 0
			if reached != tc.pass {
				t.Fatalf("reached the endpoint: %v, want %v (status %d, %s; upstream saw %v)", reached, tc.pass, rec.Code, rec.Body, log.all())
			}
			if !tc.pass && rec.Code != http.StatusNotFound {
				t.Fatalf("refused with %d, want 404: %s", rec.Code, rec.Body)
			}
			if tc.pass {
				if got, want := log.all()[0], tc.method+" "+tc.path; got != want {
					t.Fatalf("upstream saw %q, want %q", got, want)
				}
			}
		})
	}
}

// TestModelPathScrubsKey: an endpoint that echoes the request's
// credential (in an error, a header, a streamed or compressed body) never
// hands the box the real key; the box sees its placeholder instead.
func TestModelPathScrubsKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
	}{
		{"error body", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":{"message":"invalid key: `+r.Header.Get("Authorization")+`"}}`)
		}},
		{"header", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Request-Id", r.Header.Get("Authorization"))
			_, _ = io.WriteString(w, `{}`)
		}},
		{"streamed and split", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			auth := r.Header.Get("Authorization")
			fl := w.(http.Flusher)
			for _, part := range []string{"data: {\"echo\":\"" + auth[:20], auth[20:] + "\"}\n\n", "data: [DONE]\n\n"} {
				_, _ = io.WriteString(w, part)
				fl.Flush()
			}
		}},
		{"gzip", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Encoding", "gzip")
			zw := gzip.NewWriter(w)
			_, _ = io.WriteString(zw, "echo "+r.Header.Get("Authorization"))
			_ = zw.Close()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mp, _ := newTestModelProxy(t, tc.h)
			rec := boxRequest(mp, "POST", "/v1/chat/completions", `{"stream":true}`)
			got := rec.Body.String()
			for k, v := range rec.Header() {
				got += "\n" + k + ": " + strings.Join(v, ",")
			}
			if strings.Contains(got, testModelKey) {
				t.Fatalf("the box got the real key: %s", got)
			}
			if !strings.Contains(got, testPlaceholder) {
				t.Fatalf("the echo should carry the placeholder instead: %s", got)
			}
		})
	}
}
