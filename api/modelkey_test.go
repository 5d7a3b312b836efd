package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
)

// TestModelKeyBoundToEndpoint: a profile's write-only model key is bound
// to its endpoint. Changing base_url without sending the key again is
// refused, so nobody who may edit the profile can send the stored key to
// a host of their choosing (test-model or a Session would carry it there).
func TestModelKeyBoundToEndpoint(t *testing.T) {
	e := newEnv(t, 0)
	const key = "sk-bound-0123456789abcdef"
	model := fakemodel.New(t, fakemodel.Text("OK"), fakemodel.Text("OK"), fakemodel.Text("OK")).WithKey(key)
	var mu sync.Mutex
	var seen []string // the Authorization headers the other host got
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
	}))
	defer other.Close()
	profile := func(base string, key string) map[string]any {
		m := map[string]any{"base_url": base, "models": []string{"fake-1"}}
		if key != "" {
			m["api_key"] = key
		}
		return map[string]any{"backend": "process", "model": m}
	}
	check := func() api.ModelCheck {
		t.Helper()
		code, body := call(t, e, "POST", "/api/v1/runtime-profiles/p/test-model", nil)
		if code != http.StatusOK {
			t.Fatalf("test-model: %d %s", code, body)
		}
		var res api.ModelCheck
		_ = json.Unmarshal(body, &res)
		return res
	}

	if code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/p", profile(model.URL(), key)); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/p", profile(other.URL+"/v1", ""))
	if code != http.StatusBadRequest || !strings.Contains(string(body), "INVALID_REQUEST") || !strings.Contains(string(body), "api_key") {
		t.Fatalf("a new base_url without the key: %d %s, want 400 INVALID_REQUEST naming api_key", code, body)
	}
	if res := check(); !res.OK {
		t.Fatalf("the profile was changed by the refused PUT: %+v", res)
	}
	// The same endpoint written another way keeps the key.
	if code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/p", profile(strings.Replace(model.URL(), "http://", "HTTP://", 1)+"/", "")); code != http.StatusOK {
		t.Fatalf("the same endpoint without the key: %d %s", code, body)
	}
	if res := check(); !res.OK {
		t.Fatalf("the kept key no longer works: %+v", res)
	}
	// Sent again, the key may go to the new host.
	if code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/p", profile(other.URL+"/v1", "sk-other-key-0123456789")); code != http.StatusOK {
		t.Fatalf("a new base_url with a key: %d %s", code, body)
	}
	check()
	mu.Lock()
	defer mu.Unlock()
	for _, h := range seen {
		if strings.Contains(h, key) {
			t.Fatalf("the other host got the first endpoint's key: %v", seen)
		}
	}
	if len(seen) != 1 || seen[0] != "Bearer sk-other-key-0123456789" {
		t.Fatalf("the other host saw %v, want the key sent for it once", seen)
	}
}

// TestModelCheckHidesEchoedKey: an endpoint whose error quotes the
// request's credential does not reveal the write-only key through
// test-model's message.
func TestModelCheckHidesEchoedKey(t *testing.T) {
	e := newEnv(t, 0)
	const key = "sk-echoed-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":{"message":"bad credential `+r.Header.Get("Authorization")+`"}}`)
	}))
	defer echo.Close()
	if code, body := call(t, e, "PUT", "/api/v1/runtime-profiles/echo", map[string]any{"backend": "process",
		"model": map[string]any{"base_url": echo.URL + "/v1", "api_key": key, "models": []string{"m"}}}); code != http.StatusOK {
		t.Fatalf("PUT: %d %s", code, body)
	}
	code, body := call(t, e, "POST", "/api/v1/runtime-profiles/echo/test-model", nil)
	if code != http.StatusOK || strings.Contains(string(body), key) || !strings.Contains(string(body), "bad credential") {
		t.Fatalf("test-model: %d %s (want the endpoint's message without the key)", code, body)
	}
}
