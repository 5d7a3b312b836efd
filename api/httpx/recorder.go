package httpx

import "net/http"

// Recorder is the server's wrapper of a request's ResponseWriter: it
// keeps the status answered and the error the answer was made of
// (RecordError), for the request's log line. It passes Flush through and
// unwraps (Unwrap) for http.ResponseController, so streams and hijacking
// work through it. A Recorder serves one request; it is not safe for
// concurrent use beyond what its ResponseWriter allows.
type Recorder struct {
	http.ResponseWriter
	status int
	err    error
}

// NewRecorder wraps w; its status is 200 until WriteHeader says otherwise.
func NewRecorder(w http.ResponseWriter) *Recorder {
	return &Recorder{ResponseWriter: w, status: http.StatusOK}
}

// Status is the status last passed to WriteHeader (200 when none was).
func (r *Recorder) Status() int { return r.status }

// Err is the error last recorded (RecordError), or nil.
func (r *Recorder) Err() error { return r.err }

// WriteHeader records code and passes it on.
func (r *Recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Flush flushes the wrapped writer when it can.
func (r *Recorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (hijacking for
// WebSocket upgrades through the proxy).
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// RecordError keeps err on the Recorder found under w's wrappers (those
// with an Unwrap() http.ResponseWriter method), for the request's log
// line; without one it does nothing. A handler that answers an error in a
// shape of its own calls it so that the log still carries the cause.
func RecordError(w http.ResponseWriter, err error) {
	if rec := recorderOf(w); rec != nil {
		rec.err = err
	}
}

// recorderOf finds the Recorder under w's wrappers, or nil.
func recorderOf(w http.ResponseWriter) *Recorder {
	for range 8 { // wrappers are few; a bound guards against cycles
		switch v := w.(type) {
		case *Recorder:
			return v
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return nil
		}
	}
	return nil
}
