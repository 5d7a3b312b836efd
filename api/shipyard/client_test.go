package shipyard_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

// bay is a client of the Shipyard Neo (Bay) API written from the issue's
// description of the wire, as the shipyard-neo-sdk and AstrBot use it: a
// base URL that keeps its path, a bearer token, JSON bodies, Bay's error
// envelope.
type bay struct {
	t     testing.TB
	base  string // e.g. http://host:port/shipyard
	token string
	hc    *http.Client
}

func newBay(t testing.TB, base, token string) *bay {
	return &bay{t: t, base: strings.TrimRight(base, "/"), token: token, hc: &http.Client{Timeout: 10 * time.Minute}}
}

// resp is an answer: its status, headers and body.
type resp struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a generic map.
func (r resp) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("decode %d %s: %v", r.Status, r.Body, err)
	}
	return m
}

// Err returns the error envelope's fields, failing t when the body is not
// Bay's shape {"error": {code, message, request_id, details}}.
func (r resp) Err(t testing.TB) map[string]any {
	t.Helper()
	e, ok := r.JSON(t)["error"].(map[string]any)
	if !ok {
		t.Fatalf("answer %d %s is not Bay's error shape", r.Status, r.Body)
	}
	for _, k := range []string{"code", "message", "request_id", "details"} {
		if _, ok := e[k]; !ok {
			t.Fatalf("error %s lacks %q", r.Body, k)
		}
	}
	if _, ok := e["details"].(map[string]any); !ok {
		t.Fatalf("error details of %s are not an object", r.Body)
	}
	return e
}

func (c *bay) do(method, path string, body any, hdr ...string) resp {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			c.t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return c.send(req)
}

func (c *bay) send(req *http.Request) resp {
	c.t.Helper()
	res, err := c.hc.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp{Status: res.StatusCode, Header: res.Header, Body: b}
}

// must is do that fails t unless the status is want, and decodes the body.
func (c *bay) must(want int, method, path string, body any, hdr ...string) map[string]any {
	c.t.Helper()
	r := c.do(method, path, body, hdr...)
	if r.Status != want {
		c.t.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	if len(r.Body) == 0 {
		return nil
	}
	return r.JSON(c.t)
}

func q(path string, kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return path + "?" + v.Encode()
}

// statuses are the only words Bay's clients accept as a sandbox status.
var statuses = map[string]bool{"idle": true, "starting": true, "ready": true, "failed": true, "expired": true}

// sandboxFields checks a SandboxResponse: every field present (expires_at
// and idle_expires_at even when null), status one of Bay's, cargo_id a
// string.
func sandboxFields(t testing.TB, sb map[string]any) {
	t.Helper()
	for _, k := range []string{"id", "status", "profile", "cargo_id", "capabilities", "created_at", "expires_at", "idle_expires_at"} {
		if _, ok := sb[k]; !ok {
			t.Fatalf("sandbox %v lacks %q", sb, k)
		}
	}
	if s, _ := sb["status"].(string); !statuses[s] {
		t.Fatalf("status %v is not one of Bay's", sb["status"])
	}
	if _, ok := sb["cargo_id"].(string); !ok {
		t.Fatalf("cargo_id %v is not a string", sb["cargo_id"])
	}
	for _, c := range sb["capabilities"].([]any) {
		if c == "browser" {
			t.Fatalf("capabilities %v advertise a browser", sb["capabilities"])
		}
	}
}

// waitReady polls the sandbox every 200 ms, as AstrBot does every 2 s, for
// up to 180 s until it is ready, checking every answer's shape on the way.
func (c *bay) waitReady(id string) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(180 * time.Second)
	for {
		sb := c.must(200, "GET", "/v1/sandboxes/"+id, nil)
		sandboxFields(c.t, sb)
		switch sb["status"] {
		case "ready":
			return sb
		case "failed", "expired":
			c.t.Fatalf("sandbox %s became %v", id, sb["status"])
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("sandbox %s not ready after 180 s: %v", id, sb)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (c *bay) shell(id, command string, extra ...any) map[string]any {
	c.t.Helper()
	body := map[string]any{"command": command}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return c.must(200, "POST", "/v1/sandboxes/"+id+"/shell/exec", body)
}

func (c *bay) python(id, code string) map[string]any {
	c.t.Helper()
	return c.must(200, "POST", "/v1/sandboxes/"+id+"/python/exec", map[string]any{"code": code, "timeout": 60})
}
