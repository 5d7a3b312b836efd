package metrics

import "net/http"

// StatusRecorder is an http.ResponseWriter that remembers the status a
// handler answered with (Status; 200 unless it wrote another), for a
// request's metrics and audit. It passes Flush on, for streamed answers,
// and Unwrap lets http.ResponseController find what is beneath.
type StatusRecorder struct {
	http.ResponseWriter
	Status int
}

// NewStatusRecorder wraps w.
func NewStatusRecorder(w http.ResponseWriter) *StatusRecorder {
	return &StatusRecorder{ResponseWriter: w, Status: http.StatusOK}
}

// WriteHeader records code and writes it.
func (r *StatusRecorder) WriteHeader(code int) {
	r.Status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush flushes the answer written so far, when w can.
func (r *StatusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap returns the wrapped writer.
func (r *StatusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
