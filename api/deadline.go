package api

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Body read deadlines. A client must send a request's body within
// Config.BodyReadTimeout of the request's start, so that clients that
// trickle bytes (slowloris) cannot hold connections forever; the deadline
// also bounds what the server reads of a body the handler left unread
// (an unauthenticated request's). Once the body has been read to its end
// or closed the deadline is lifted, so a handler that works long after it
// (a create, a response stream) is never cut off. Requests without a body
// get no deadline (their headers have the server's ReadHeaderTimeout),
// nor do the sandbox proxy's: their bodies are the sandbox's streams
// (uploads, WebSockets), which the sandbox bounds.

// boundBodyRead sets r's body read deadline and replaces r.Body with one
// that lifts it at the end. Connections that do not support deadlines are
// left as they are.
func (s *Server) boundBodyRead(w http.ResponseWriter, r *http.Request) {
	if s.cfg.BodyReadTimeout <= 0 || r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 || isProxyPath(r.URL.Path) {
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Now().Add(s.cfg.BodyReadTimeout)); err != nil {
		return
	}
	r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
}

// isProxyPath reports whether path is under /v1/sandboxes/{id}/proxy/.
func isProxyPath(path string) bool {
	rest, ok := strings.CutPrefix(path, "/v1/sandboxes/")
	if !ok {
		return false
	}
	_, rest, ok = strings.Cut(rest, "/")
	return ok && (rest == "proxy" || strings.HasPrefix(rest, "proxy/"))
}

// deadlineBody lifts the connection's read deadline once the body ends:
// when a read reaches its end (io.EOF) or on Close. Other read errors (the
// deadline itself) leave it, so that what the server reads after them is
// bounded too.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.lift()
	}
	return n, err
}

// Close closes the body (the server reads what is left of it, under the
// deadline) and then lifts the deadline.
func (b *deadlineBody) Close() error {
	err := b.ReadCloser.Close()
	b.lift()
	return err
}

func (b *deadlineBody) lift() { b.once.Do(func() { _ = b.rc.SetReadDeadline(time.Time{}) }) }
