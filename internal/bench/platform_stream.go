package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/sse"
)

// maxReplyFrames bounds the frames the bench reads from one stream.
const maxReplyFrames = 100_000

// replyTimeout bounds one reply, from opening its stream to [DONE].
const replyTimeout = 2 * time.Minute

// errNoContent is a resume answered 204 (nothing to replay).
var errNoContent = errors.New("204 No Content: nothing to replay")

// sessionStream is the client side of a Session's ai-stream or events
// stream: SSE frames, each stamped with the time it was parsed.
type sessionStream struct {
	resp *http.Response
	rd   *sse.Reader
}

// streamFrame is one frame as a client sees it. Seq is its id (0 for a
// frame sent without one, such as the transient resume cursor); Done marks
// the ai-stream's "[DONE]".
type streamFrame struct {
	Seq  int64
	Type string
	Done bool
	At   time.Time
	// Data is the frame's data as sent.
	Data string
}

// openStream GETs path (an ai-stream or events URL) and returns once the
// response headers arrived: from then on the server follows the log for
// this client. ctx bounds the whole stream; close releases it.
func (e *platformEnv) openStream(ctx context.Context, path string) (*sessionStream, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.url+path, nil)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	req.Header.Set(api.HeaderAPIKey, benchAPIKey)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return &sessionStream{resp: resp, rd: sse.NewReader(resp.Body, 8<<20)}, nil
	case http.StatusNoContent:
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: %w", path, errNoContent)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return nil, fmt.Errorf("GET %s: status %d: %s", path, resp.StatusCode, strings.TrimSpace(string(b)))
}

// next returns the next frame; io.EOF when the server closed the stream.
func (s *sessionStream) next() (streamFrame, error) {
	f, err := s.rd.Next()
	if err != nil {
		return streamFrame{}, err
	}
	out := streamFrame{At: time.Now(), Data: f.Data}
	if f.ID != "" {
		if out.Seq, err = strconv.ParseInt(f.ID, 10, 64); err != nil {
			return streamFrame{}, fmt.Errorf("frame id %q: %w", f.ID, err)
		}
	}
	if strings.TrimSpace(f.Data) == "[DONE]" {
		out.Done = true
		return out, nil
	}
	// An ai-stream frame is the UI chunk itself; an events frame wraps
	// the entry: both carry its type at the top level.
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal([]byte(f.Data), &head); err != nil {
		return streamFrame{}, fmt.Errorf("frame %q: %w", f.Data, err)
	}
	out.Type = head.Type
	return out, nil
}

// close ends the stream.
func (s *sessionStream) close() { _ = s.resp.Body.Close() }

// replyTrace is what a client saw of one reply on the ai-stream.
type replyTrace struct {
	// FirstToken is the time from t0 to the first text-delta frame.
	FirstToken time.Duration
	// First and Last are the seqs of the reply's first and last frames.
	First, Last int64
}

// reply opens the session's ai-stream (follow=session), posts an input,
// and reads the reply to its [DONE]. t0 is when the clock of FirstToken
// started; zero means just before the POST.
func (e *platformEnv) reply(ctx context.Context, sid string, t0 time.Time) (replyTrace, error) {
	ctx, cancel := context.WithTimeout(ctx, replyTimeout)
	defer cancel()
	s, err := e.openStream(ctx, "/api/v1/sessions/"+sid+"/ai-stream?follow=session")
	if err != nil {
		return replyTrace{}, err
	}
	defer s.close()
	if t0.IsZero() {
		t0 = time.Now()
	}
	if _, err := e.send(ctx, sid, "say something"); err != nil {
		return replyTrace{}, err
	}
	var tr replyTrace
	for range maxReplyFrames {
		f, err := s.next()
		if err != nil {
			return tr, fmt.Errorf("session %s: ai-stream ended before [DONE]: %w", sid, err)
		}
		if f.Done {
			if tr.FirstToken == 0 {
				return tr, fmt.Errorf("session %s: a reply without text", sid)
			}
			return tr, nil
		}
		if f.Seq > 0 {
			if tr.First == 0 {
				tr.First = f.Seq
			}
			tr.Last = f.Seq
		}
		if f.Type == "data-turn-failure" {
			return tr, fmt.Errorf("session %s: the reply failed: %s", sid, f.Data)
		}
		if f.Type == "text-delta" && tr.FirstToken == 0 {
			tr.FirstToken = f.At.Sub(t0)
		}
	}
	return tr, fmt.Errorf("session %s: a reply over %d frames", sid, maxReplyFrames)
}
