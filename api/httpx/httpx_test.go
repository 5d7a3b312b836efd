package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

// wrapper is a middleware's writer over the Recorder.
type wrapper struct{ http.ResponseWriter }

func (w wrapper) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestWriteErrorRecordsTheCause: the answer carries the code's status and
// a safe message; the Recorder under the handler's wrappers keeps the
// error itself.
func TestWriteErrorRecordsTheCause(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		status  int
		code    sandbox.Code
		message string
	}{
		{"internal", fmt.Errorf("dial: %w", errors.New("secret socket path")), 500, sandbox.CodeInternal, "internal error"},
		{"coded", sandbox.Errorf(sandbox.CodeConflict, "box b1 is Paused"), 409, sandbox.CodeConflict, "box b1 is Paused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			rec := NewRecorder(w)
			WriteError(wrapper{rec}, tt.err)
			var body errorBody
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.status || rec.Status() != tt.status || body.Code != string(tt.code) || body.Message != tt.message {
				t.Fatalf("%d (recorded %d) %s %q, want %d %s %q", w.Code, rec.Status(), body.Code, body.Message, tt.status, tt.code, tt.message)
			}
			if rec.Err() != tt.err {
				t.Fatalf("recorded %v, want %v", rec.Err(), tt.err)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json" {
				t.Fatalf("Content-Type %q", ct)
			}
		})
	}
	// Without a Recorder under it, WriteError only answers.
	w := httptest.NewRecorder()
	WriteError(w, sandbox.Errorf(sandbox.CodeNotFound, "no route"))
	if w.Code != 404 {
		t.Fatalf("status %d, want 404", w.Code)
	}
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name string
		body string
		code sandbox.Code // "" for success
	}{
		{"object", `{"a": 1}`, ""},
		{"unknown field", `{"b": 1}`, ""},
		{"empty", ``, sandbox.CodeInvalidRequest},
		{"wrong type", `{"a": "x"}`, sandbox.CodeInvalidRequest},
		{"trailing data", `{"a": 1} {}`, sandbox.CodeInvalidRequest},
		{"too big", `{"a": 1` + strings.Repeat(" ", 64) + `}`, sandbox.CodePayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v struct {
				A int `json:"a"`
			}
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			err := Decode(httptest.NewRecorder(), r, &v, 32)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if got := sandbox.CodeOf(err); got != tt.code {
				t.Fatalf("code %s (%v), want %s", got, err, tt.code)
			}
		})
	}
}

func TestReadBody(t *testing.T) {
	tests := []struct {
		name string
		body string
		code sandbox.Code // "" for success
	}{
		{"object", `{"a": 1}`, ""},
		{"white space only", " \n\t", sandbox.CodeInvalidRequest},
		{"too big", strings.Repeat("x", 33), sandbox.CodePayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			b, err := ReadBody(httptest.NewRecorder(), r, 32)
			if tt.code == "" {
				if err != nil || string(b) != tt.body {
					t.Fatalf("%q, %v", b, err)
				}
				return
			}
			if got := sandbox.CodeOf(err); got != tt.code {
				t.Fatalf("code %s (%v), want %s", got, err, tt.code)
			}
		})
	}
	if err := DecodeBytes([]byte("{"), &struct{}{}); sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("DecodeBytes of invalid JSON: %v", err)
	}
}
