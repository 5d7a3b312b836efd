package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/internal/sse"
)

// ErrStop, returned by a Follow callback, ends Follow with a nil error.
var ErrStop = errors.New("client: stop following")

// errIdle ends a connection on which nothing, not even a keepalive, came
// for the idle timeout.
var errIdle = errors.New("no data or keepalive from the server")

// Event is one entry of a Session's durable log, as GET
// /api/v1/sessions/{id}/events streams it. Seqs start at 1 and have no
// gaps. A UI frame's Type is its chunk type ("text-delta", ...) with the
// chunk as Payload; a control event's is a dotted name ("turn.ended",
// "state.changed", ...).
type Event struct {
	Seq       int64           `json:"seq"`
	Type      string          `json:"type"`
	TurnID    string          `json:"turn_id,omitempty"`
	InputID   string          `json:"input_id,omitempty"`
	MessageID string          `json:"message_id,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	At        time.Time       `json:"at"`
}

// IsFrame reports whether the event is a UI frame (not a control event).
func (e Event) IsFrame() bool { return !strings.Contains(e.Type, ".") }

// Chunk decodes a UI frame's payload.
func (e Event) Chunk() (Chunk, error) {
	if !e.IsFrame() {
		return Chunk{}, fmt.Errorf("event %d (%s) is a control event, not a UI frame", e.Seq, e.Type)
	}
	var ch Chunk
	if err := json.Unmarshal(e.Payload, &ch); err != nil {
		return Chunk{}, fmt.Errorf("decode chunk %d: %w", e.Seq, err)
	}
	ch.Seq, ch.Raw = e.Seq, e.Payload
	return ch, nil
}

// FollowOption adjusts how Follow and AIStream reconnect.
type FollowOption func(*followConfig)

type followConfig struct {
	minWait, maxWait time.Duration
	idle             time.Duration
	onReconnect      func(Reconnect)
}

// Reconnect describes a reconnect about to be made.
type Reconnect struct {
	// AfterSeq is the seq the stream resumes after.
	AfterSeq int64
	// Attempt counts reconnects since the last event delivered, from 1.
	Attempt int
	// Wait is how long the reconnect waits first.
	Wait time.Duration
	// Err is why the connection ended.
	Err error
}

// WithBackoff sets the wait before a reconnect: first about min, doubling
// up to max, with jitter; it starts again at min once an event arrives
// (defaults 100ms and 5s).
func WithBackoff(min, max time.Duration) FollowOption {
	return func(c *followConfig) { c.minWait, c.maxWait = min, max }
}

// WithIdleTimeout drops and remakes a connection on which nothing came
// for d (default 45s: three of the server's 15 s keepalives; 0: never).
func WithIdleTimeout(d time.Duration) FollowOption {
	return func(c *followConfig) { c.idle = d }
}

// OnReconnect calls fn before every reconnect (to tell a user, say).
func OnReconnect(fn func(Reconnect)) FollowOption {
	return func(c *followConfig) { c.onReconnect = fn }
}

func newFollowConfig(opts []FollowOption) followConfig {
	c := followConfig{minWait: 100 * time.Millisecond, maxWait: 5 * time.Second, idle: 45 * time.Second}
	for _, o := range opts {
		o(&c)
	}
	c.minWait = max(c.minWait, time.Millisecond)
	c.maxWait = max(c.maxWait, c.minWait)
	return c
}

// backoff is the wait before the next reconnect.
type backoff struct {
	cfg     followConfig
	cur     time.Duration
	attempt int
}

func (b *backoff) reset() { b.cur, b.attempt = 0, 0 }

// wait sleeps before reconnect number b.attempt+1, telling the hook.
func (b *backoff) wait(ctx context.Context, after int64, cause error) error {
	b.cur = min(max(b.cur*2, b.cfg.minWait), b.cfg.maxWait)
	b.attempt++
	d := b.cur/2 + rand.N(b.cur/2+1)
	if b.cfg.onReconnect != nil {
		b.cfg.onReconnect(Reconnect{AfterSeq: after, Attempt: b.attempt, Wait: d, Err: cause})
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// callbackError carries the callback's error out of followOnce.
type callbackError struct{ err error }

func (e callbackError) Error() string { return e.err.Error() }

// permanentError is a failure a reconnect would only repeat.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// gapError is an event seq past the next one expected.
type gapError struct{ after, got int64 }

func (e *gapError) Error() string {
	return fmt.Sprintf("event stream jumped from seq %d to %d", e.after, e.got)
}

// maxGapRetries bounds reconnects that each find the same hole in the log.
const maxGapRetries = 5

// retryable reports whether a reconnect may cure err: a dropped
// connection, a server restarting or overloaded (5xx, 429), a hole in
// what was read; not a refusal (4xx) or a malformed stream.
func retryable(err error) bool {
	var ae *APIError
	var pe permanentError
	switch {
	case errors.As(err, &ae):
		return ae.Status >= 500 || ae.Status == http.StatusTooManyRequests || ae.Status == http.StatusRequestTimeout
	case errors.As(err, &pe):
		return false
	}
	return true
}

// Follow calls fn with every event of the Session's log after seq
// afterSeq, in order, and keeps following live. A dropped connection or a
// server restart is survived: Follow reconnects with backoff from the last
// seq it delivered (after_seq and Last-Event-ID), so fn sees every seq
// exactly once and in order, none skipped, none repeated.
//
// Follow returns when ctx ends (ctx.Err()), when fn returns an error (that
// error as is; ErrStop gives nil), or on an error a reconnect cannot cure:
// an error answer other than 5xx or 429 (*APIError, e.g.
// SESSION_NOT_FOUND), or a malformed stream.
func (c *Client) Follow(ctx context.Context, sessionID string, afterSeq int64, fn func(Event) error, opts ...FollowOption) error {
	cfg := newFollowConfig(opts)
	b := backoff{cfg: cfg}
	last, gaps := afterSeq, 0
	for {
		before := last
		err := c.followOnce(ctx, sessionID, &last, fn, cfg.idle)
		var ce callbackError
		switch {
		case errors.As(err, &ce):
			if errors.Is(ce.err, ErrStop) {
				return nil
			}
			return ce.err
		case ctx.Err() != nil:
			return ctx.Err()
		case !retryable(err):
			return fmt.Errorf("follow session %s: %w", sessionID, err)
		}
		if last > before {
			b.reset()
			gaps = 0
		}
		var ge *gapError
		if errors.As(err, &ge) {
			if gaps++; gaps > maxGapRetries {
				return fmt.Errorf("follow session %s: %w", sessionID, err)
			}
		}
		if err := b.wait(ctx, last, err); err != nil {
			return err
		}
	}
}

// followOnce reads one connection of the event stream, delivering the
// events after *last and advancing it; it always returns an error.
func (c *Client) followOnce(ctx context.Context, sessionID string, last *int64, fn func(Event) error, idle time.Duration) error {
	conn, stop, err := c.openStream(ctx, "/sessions/"+url.PathEscape(sessionID)+"/events", url.Values{}, *last, idle)
	if err != nil {
		return err
	}
	defer stop()
	r := sse.NewReader(conn.Body, 0)
	for {
		f, err := r.Next()
		if err != nil {
			return streamError(conn.ctx, err)
		}
		var ev Event
		if err := json.Unmarshal([]byte(f.Data), &ev); err != nil {
			return permanentError{fmt.Errorf("decode event: %w", err)}
		}
		switch {
		case ev.Seq <= *last:
			continue // already delivered
		case ev.Seq != *last+1:
			return &gapError{after: *last, got: ev.Seq}
		}
		if err := fn(ev); err != nil {
			return callbackError{err}
		}
		*last = ev.Seq
	}
}

// stream is one open event-stream connection.
type stream struct {
	*http.Response
	ctx context.Context // its own; its cause is errIdle after a silence
}

// openStream opens an SSE route after seq after (negative: none) with a
// watchdog that ends the connection after idle without data (idle > 0); stop closes
// it. A 204 answer is returned with a nil error and an empty body.
func (c *Client) openStream(ctx context.Context, path string, q url.Values, after int64, idle time.Duration) (*stream, func(), error) {
	ctx, cancel := context.WithCancelCause(ctx)
	hdr := http.Header{"Accept": {"text/event-stream"}}
	if after >= 0 {
		q.Set("after_seq", strconv.FormatInt(after, 10))
		hdr.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := c.apiDo(ctx, http.MethodGet, path, q, nil, hdr)
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	var watch *time.Timer
	if idle > 0 {
		watch = time.AfterFunc(idle, func() { cancel(errIdle) })
		resp.Body = &idleReader{ReadCloser: resp.Body, t: watch, d: idle}
	}
	stop := func() {
		if watch != nil {
			watch.Stop()
		}
		resp.Body.Close()
		cancel(nil)
	}
	return &stream{Response: resp, ctx: ctx}, stop, nil
}

// streamError names why a stream's read ended.
func streamError(ctx context.Context, err error) error {
	switch {
	case errors.Is(context.Cause(ctx), errIdle):
		return errIdle
	case errors.Is(err, io.EOF):
		return errors.New("the server closed the event stream")
	case errors.Is(err, sse.ErrFrameTooLarge):
		return permanentError{err}
	}
	return fmt.Errorf("read event stream: %w", err)
}

// idleReader restarts its timer whenever data arrives.
type idleReader struct {
	io.ReadCloser
	t *time.Timer
	d time.Duration
}

func (r *idleReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	if n > 0 {
		r.t.Reset(r.d)
	}
	return n, err
}
