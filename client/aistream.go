package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/platform/wire"
)

// ErrNoReply is AIStream's answer when there is no reply to stream: the
// seq given is at or past the end of the last reply and none is in
// progress (HTTP 204).
var ErrNoReply = errors.New("client: no reply to stream")

// Chunk is an AI SDK UI message stream chunk with its common fields
// decoded; Raw is the whole chunk.
type Chunk struct {
	// Seq is the chunk's log seq, 0 for a transient chunk (the
	// data-resume-cursor at a reply's end).
	Seq          int64           `json:"-"`
	Type         wire.ChunkType  `json:"type"`
	ID           string          `json:"id,omitempty"`
	Delta        string          `json:"delta,omitempty"`
	MessageID    string          `json:"messageId,omitempty"`
	ToolCallID   string          `json:"toolCallId,omitempty"`
	ToolName     string          `json:"toolName,omitempty"`
	Input        json.RawMessage `json:"input,omitempty"`
	Output       json.RawMessage `json:"output,omitempty"`
	ErrorText    string          `json:"errorText,omitempty"`
	FinishReason string          `json:"finishReason,omitempty"`
	Data         json.RawMessage `json:"data,omitempty"`
	Transient    bool            `json:"transient,omitempty"`
	Raw          json.RawMessage `json:"-"`
}

// ChunkStream reads one reply of a Session's AI SDK UI message stream.
// It is not safe for concurrent use: Close must not run while Next does
// (end the ctx given to AIStream to stop a waiting Next).
type ChunkStream struct {
	c         *Client
	ctx       context.Context
	path      string
	follow    bool
	afterSeq  int64
	cfg       followConfig
	b         backoff
	conn      *stream
	stop      func()
	r         *sse.Reader
	last      int64 // seq of the last chunk delivered
	finished  bool  // the reply's finish chunk was delivered
	done      bool
	lastError error
}

// AIStream opens GET /api/v1/sessions/{id}/ai-stream. afterSeq >= 0
// resumes: the reply that seq falls inside, from its start, or else the
// next one; ErrNoReply when there is none and follow is false. With
// follow, afterSeq < 0 streams the reply in progress from its start, or
// else the next reply, waiting for it.
//
// Next returns the reply's chunks, in order, through its finish and the
// transient data-resume-cursor, then io.EOF. A connection dropped before
// the finish chunk is resumed from the last chunk delivered, none
// repeated; one dropped after it ends the stream (the cursor may be
// missed). ctx bounds the whole stream; Close releases it.
func (c *Client) AIStream(ctx context.Context, sessionID string, afterSeq int64, follow bool, opts ...FollowOption) (*ChunkStream, error) {
	cfg := newFollowConfig(opts)
	s := &ChunkStream{c: c, ctx: ctx, path: "/sessions/" + url.PathEscape(sessionID) + "/ai-stream",
		follow: follow, afterSeq: afterSeq, cfg: cfg, b: backoff{cfg: cfg}}
	if err := s.open(); err != nil {
		return nil, err
	}
	if s.done {
		return nil, ErrNoReply
	}
	return s, nil
}

// open connects after the last chunk delivered (the first time, after
// afterSeq).
func (s *ChunkStream) open() error {
	q := url.Values{}
	if s.follow {
		q.Set("follow", "session")
	}
	after := s.afterSeq
	if s.last > 0 {
		after = s.last
	}
	conn, stop, err := s.c.openStream(s.ctx, s.path, q, after, s.cfg.idle)
	if err != nil {
		return err
	}
	if conn.StatusCode == http.StatusNoContent {
		stop()
		s.done = true
		return nil
	}
	if s.afterSeq < 0 {
		// The first answer names where the stream stands: a reconnection
		// before the first chunk resumes there, not at a later reply.
		if n, err := strconv.ParseInt(conn.Header.Get(wire.HeaderStreamAfter), 10, 64); err == nil && n >= 0 {
			s.afterSeq = n
		}
	}
	s.conn, s.stop, s.r = conn, stop, sse.NewReader(conn.Body, 0)
	return nil
}

// Next returns the next chunk, or io.EOF after the reply's [DONE].
func (s *ChunkStream) Next() (Chunk, error) {
	for {
		if s.done {
			return Chunk{}, io.EOF
		}
		if s.r == nil {
			if err := s.b.wait(s.ctx, s.last, s.lastError); err != nil {
				return Chunk{}, err
			}
			if err := s.open(); err != nil {
				if !retryable(err) || s.ctx.Err() != nil {
					return Chunk{}, err
				}
				s.lastError = err
			}
			continue
		}
		f, err := s.r.Next()
		if err != nil {
			err = streamError(s.conn.ctx, err)
			s.closeConn()
			switch {
			case s.finished:
				s.done = true
				return Chunk{}, io.EOF
			case s.ctx.Err() != nil:
				return Chunk{}, s.ctx.Err()
			case !retryable(err):
				return Chunk{}, err
			}
			s.lastError = err
			continue
		}
		if f.Data == "[DONE]" {
			s.done = true
			s.closeConn()
			return Chunk{}, io.EOF
		}
		var ch Chunk
		if err := json.Unmarshal([]byte(f.Data), &ch); err != nil {
			return Chunk{}, fmt.Errorf("decode chunk: %w", err)
		}
		ch.Raw = json.RawMessage(f.Data)
		if f.ID != "" {
			seq, err := strconv.ParseInt(f.ID, 10, 64)
			if err != nil {
				return Chunk{}, fmt.Errorf("chunk id %q: %w", f.ID, err)
			}
			if seq <= s.last {
				continue // delivered before the reconnect
			}
			ch.Seq, s.last = seq, seq
			s.b.reset()
		}
		s.finished = s.finished || ch.Type == wire.ChunkFinish
		return ch, nil
	}
}

func (s *ChunkStream) closeConn() {
	if s.stop != nil {
		s.stop()
	}
	s.conn, s.stop, s.r = nil, nil, nil
}

// Close ends the stream; Next then returns io.EOF.
func (s *ChunkStream) Close() error {
	s.done = true
	s.closeConn()
	return nil
}
