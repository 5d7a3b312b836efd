package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
)

// TestModelCheck: POST /api/v1/runtime-profiles/{name}/test-model asks the
// profile's endpoint with its sealed key and reports the outcome.
func TestModelCheck(t *testing.T) {
	e := newEnv(t, 0)
	const key = "sk-check-0123456789"
	model := fakemodel.New(t,
		fakemodel.Text("OK"),
		fakemodel.Status(http.StatusTooManyRequests, `{"error":{"message":"rate limited, retry later"}}`),
		fakemodel.Text("OK"),
	).WithKey(key)
	put := func(name string, profile map[string]any) {
		t.Helper()
		if code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/"+name, profile); code != http.StatusOK {
			t.Fatalf("PUT profile %s: %d %s", name, code, body)
		}
	}
	put("good", map[string]any{"backend": "process", "model": map[string]any{"base_url": model.URL(), "api_key": key, "models": []string{"fake-1", "fake-2"}}})
	put("badkey", map[string]any{"backend": "process", "model": map[string]any{"base_url": model.URL(), "api_key": "sk-wrong", "models": []string{"fake-1"}}})
	put("nomodels", map[string]any{"backend": "process", "model": map[string]any{"base_url": model.URL(), "api_key": key}})
	put("noendpoint", map[string]any{"backend": "process"})
	down := httptest.NewServer(http.NotFoundHandler())
	downURL := down.URL + "/v1"
	down.Close()
	put("down", map[string]any{"backend": "process", "model": map[string]any{"base_url": downURL, "api_key": key, "models": []string{"fake-1"}}})

	tests := []struct {
		name, profile string
		body          any
		wantCode      int
		want          api.ModelCheck // OK, Model, Status, and a substring of Message
	}{
		{"ok with the first model", "good", nil, 200, api.ModelCheck{OK: true, Model: "fake-1", Status: 200}},
		{"endpoint error", "good", map[string]string{"model": "fake-2"}, 200, api.ModelCheck{Model: "fake-2", Status: 429, Message: "rate limited, retry later"}},
		{"wrong key", "badkey", nil, 200, api.ModelCheck{Model: "fake-1", Status: 401, Message: "invalid API key"}},
		{"named model", "nomodels", map[string]string{"model": "any"}, 200, api.ModelCheck{OK: true, Model: "any", Status: 200}},
		{"unreachable", "down", nil, 200, api.ModelCheck{Model: "fake-1", Message: "unreachable"}},
		{"no model to ask", "nomodels", nil, 400, api.ModelCheck{}},
		{"no endpoint", "noendpoint", nil, 400, api.ModelCheck{}},
		{"unknown profile", "nope", nil, 404, api.ModelCheck{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := call(t, e, "POST", "/api/v1/runtime-profiles/"+tt.profile+"/test-model", tt.body)
			if code != tt.wantCode {
				t.Fatalf("status %d %s, want %d", code, body, tt.wantCode)
			}
			if code != http.StatusOK {
				return
			}
			var got api.ModelCheck
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if got.OK != tt.want.OK || got.Model != tt.want.Model || got.Status != tt.want.Status || !strings.Contains(got.Message, tt.want.Message) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if strings.Contains(string(body), key) {
				t.Errorf("the answer shows the model key: %s", body)
			}
		})
	}
	for _, req := range model.Requests() {
		if req.Body.Stream != true || len(req.Body.Messages) != 1 {
			t.Errorf("the check sent %s, want one streamed message", req.Raw)
		}
	}
}

// call makes an authenticated JSON request to e and returns the status
// and body.
func call(t *testing.T, e *env, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd *bytes.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	} else {
		rd = bytes.NewReader(nil)
	}
	req, err := http.NewRequest(method, e.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(api.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out bytes.Buffer
	_, _ = out.ReadFrom(resp.Body)
	return resp.StatusCode, out.Bytes()
}
