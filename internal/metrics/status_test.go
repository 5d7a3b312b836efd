package metrics

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestStatusRecorder(t *testing.T) {
	for _, tc := range []struct {
		name string
		h    http.HandlerFunc
		want int
	}{
		{"a body alone", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("x")) }, 200},
		{"a status", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }, http.StatusTeapot},
		{"flushed through the controller", func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusAccepted)
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("flush: %v", err)
			}
		}, http.StatusAccepted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := httptest.NewRecorder()
			rec := NewStatusRecorder(out)
			tc.h(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Status != tc.want || out.Code != tc.want {
				t.Fatalf("recorded %d, answered %d; want %d", rec.Status, out.Code, tc.want)
			}
		})
	}
}
