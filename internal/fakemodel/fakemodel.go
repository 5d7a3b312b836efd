// Package fakemodel is a scripted OpenAI Chat Completions server for
// tests (a test helper, not a product feature). Each POST to
// /v1/chat/completions (or /chat/completions) plays the next scripted
// Reply as a stream of chat.completion.chunk events: reasoning and text as
// delta fragments, tool calls as delta.tool_calls fragments, a usage chunk
// when the request asks for one, then "data: [DONE]". Every request is
// recorded, so a test can assert the history a program sent.
package fakemodel

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
)

// Exhausted is the text answered once the script has run out.
const Exhausted = "(no more scripted replies)"

// maxBody bounds a request body.
const maxBody = 64 << 20

// Server is a running fake model. It is safe for concurrent use.
type Server struct {
	t    testing.TB
	srv  *httptest.Server
	done chan struct{} // closed when the test ends, releasing held replies

	mu       sync.Mutex
	script   []Reply
	requests []Request
	key      string
	calls    int // tool call ids handed out
}

// New starts a server on loopback that plays script, one reply per
// request, and stops it when the test ends.
func New(t testing.TB, script ...Reply) *Server {
	t.Helper()
	s := &Server{t: t, done: make(chan struct{}), script: append([]Reply(nil), script...)}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.handle)
	mux.HandleFunc("/chat/completions", s.handle)
	s.srv = httptest.NewServer(mux)
	t.Cleanup(func() {
		close(s.done)
		s.srv.Close()
	})
	return s
}

// URL is the API's base URL (ending in /v1): requests go to URL() +
// "/chat/completions".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// WithKey makes the server answer 401 to a request without
// "Authorization: Bearer key", and returns s.
func (s *Server) WithKey(key string) *Server {
	s.mu.Lock()
	s.key = key
	s.mu.Unlock()
	return s
}

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	s.script = append(s.script, replies...)
	s.mu.Unlock()
}

// Requests returns every request received so far, in order (including
// refused ones).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "fakemodel: only POST is served")
		return
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "fakemodel: read body: "+err.Error())
		return
	}
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Raw: raw}
	parseErr := json.Unmarshal(raw, &req.Body)

	s.mu.Lock()
	s.requests = append(s.requests, req)
	key := s.key
	authorized := key == "" || r.Header.Get("Authorization") == "Bearer "+key
	var reply Reply
	if authorized && parseErr == nil {
		if len(s.script) > 0 {
			reply, s.script = s.script[0], s.script[1:]
		} else {
			reply = Text(Exhausted)
		}
	}
	s.mu.Unlock()

	switch {
	case !authorized:
		writeError(w, http.StatusUnauthorized, "fakemodel: invalid API key")
		return
	case parseErr != nil:
		writeError(w, http.StatusBadRequest, "fakemodel: request body: "+parseErr.Error())
		return
	}
	if reply.compute != nil {
		reply = reply.compute(req)
	}
	switch {
	case reply.reset:
		drop(w)
		return
	case reply.status != 0:
		if json.Valid([]byte(reply.body)) {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(reply.status)
		io.WriteString(w, reply.body)
		return
	case reply.raw != nil:
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, *reply.raw)
		return
	case !req.Body.Stream:
		writeError(w, http.StatusBadRequest, "fakemodel: only streaming requests (stream: true) are served")
		return
	}
	offered := req.ToolNames()
	for _, c := range reply.Calls {
		if !slices.Contains(offered, c.Name) {
			s.t.Logf("fakemodel: the script calls tool %q, which the request does not offer (%v)", c.Name, offered)
			writeError(w, http.StatusBadRequest, fmt.Sprintf("fakemodel: tool %q is not among the request's tools %v", c.Name, offered))
			return
		}
	}
	s.stream(w, r, req, s.withIDs(reply))
}

// withIDs fills in the ids of calls that have none.
func (s *Server) withIDs(r Reply) Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	r.Calls = slices.Clone(r.Calls)
	for i := range r.Calls {
		if r.Calls[i].ID == "" {
			s.calls++
			r.Calls[i].ID = fmt.Sprintf("call_%d", s.calls)
		}
	}
	return r
}

// drop closes the client's connection with a reset (SO_LINGER 0), as a
// server or a network that goes away does.
func drop(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fakemodel: the connection cannot be dropped")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	_ = buf.Flush()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	conn.Close()
}

// writeError answers an OpenAI-style error.
func writeError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
}

// wait sleeps d, or less when the client or the test goes away; it reports
// whether the stream should go on.
func (s *Server) wait(r *http.Request, d time.Duration, gate <-chan struct{}) bool {
	var timer <-chan time.Time
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	}
	if timer == nil && gate == nil {
		return r.Context().Err() == nil
	}
	select {
	case <-timer:
	case <-gate:
	case <-r.Context().Done():
		return false
	case <-s.done:
		return false
	}
	return true
}
