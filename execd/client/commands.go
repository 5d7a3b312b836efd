package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/sse"
)

// Event is one event of an execution stream, with the SSE id (the byte
// offset to resume output from, for stdout and stderr events).
type Event struct {
	ID string
	wire.Event
}

// Execution is the collected outcome of a command.
type Execution struct {
	ID       string
	Stdout   []byte
	Stderr   []byte
	ExitCode int // -1 while unknown (a background command)
	Error    *wire.ExecError
	// Offset is the resume offset after the last output event seen.
	Offset int64

	lines bool // events are lines (WithLineFraming)
}

// RunStream starts a command and calls fn for every event until the stream
// ends, fn returns an error, or ctx ends.
func (c *Client) RunStream(ctx context.Context, req wire.RunCommandRequest, fn func(Event) error) error {
	return c.stream(ctx, request{method: http.MethodPost, path: "/command"}, req, fn)
}

// Run starts a command and collects its output and exit code. For a
// background command it returns once the command started, with its ID.
func (c *Client) Run(ctx context.Context, req wire.RunCommandRequest) (*Execution, error) {
	ex := &Execution{ExitCode: -1, lines: c.lines}
	err := c.RunStream(ctx, req, ex.apply)
	return ex, err
}

func (ex *Execution) apply(ev Event) error {
	switch ev.Type {
	case wire.EventInit:
		ex.ID = ev.Text
	case wire.EventStdout:
		ex.Stdout = appendOutput(ex.Stdout, ev.Text, ex.lines)
	case wire.EventStderr:
		ex.Stderr = appendOutput(ex.Stderr, ev.Text, ex.lines)
	case wire.EventError:
		ex.Error = ev.Error
		if ev.ExitCode != nil {
			ex.ExitCode = *ev.ExitCode
		}
	case wire.EventComplete:
		if ev.ExitCode != nil {
			ex.ExitCode = *ev.ExitCode
		}
	}
	if ev.ID != "" && (ev.Type == wire.EventStdout || ev.Type == wire.EventStderr) {
		if off, err := strconv.ParseInt(ev.ID, 10, 64); err == nil {
			ex.Offset = off
		}
	}
	return nil
}

// appendOutput collects one output event's text: a line gets its "\n" back
// (a blank line's text is "\n" already).
func appendOutput(dst []byte, text string, lines bool) []byte {
	dst = append(dst, text...)
	if lines && text != "\n" {
		dst = append(dst, '\n')
	}
	return dst
}

// stream sends a request whose answer is an event stream and dispatches it.
// It asks for byte-exact output unless the client was made WithLineFraming.
func (c *Client) stream(ctx context.Context, req request, body any, fn func(Event) error) error {
	if body != nil {
		b, err := jsonBody(body)
		if err != nil {
			return err
		}
		req.body, req.contentType = b, "application/json"
	}
	if req.header == nil {
		req.header = http.Header{}
	}
	framing := wire.FramingBytes
	if c.lines {
		framing = wire.FramingLines
	}
	q := url.Values{}
	for k, v := range req.query {
		q[k] = v
	}
	q.Set(wire.QueryFraming, framing)
	req.query = q
	if c.sseOnly {
		req.header.Set("Accept", "text/event-stream")
	} else {
		req.header.Set("Accept", wire.MediaTypeFrames+", text/event-stream")
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == wire.MediaTypeFrames {
		return readFrames(resp.Body, fn)
	}
	return readEvents(resp.Body, fn)
}

// readFrames parses a wire.MediaTypeFrames stream and calls fn for each
// event. Output frames become stdout/stderr events whose ID is the resume
// offset.
func readFrames(r io.Reader, fn func(Event) error) error {
	br := bufio.NewReaderSize(r, 256<<10)
	var buf []byte
	for {
		kind, off, payload, nbuf, err := wire.ReadFrame(br, buf)
		buf = nbuf
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read frame stream: %w", err)
		}
		var ev Event
		switch kind {
		case wire.FrameStdout, wire.FrameStderr:
			ev.Type = wire.EventStdout
			if kind == wire.FrameStderr {
				ev.Type = wire.EventStderr
			}
			ev.Text = string(payload)
			ev.ID = strconv.FormatUint(off, 10)
		default:
			if err := jsonUnmarshal(payload, &ev.Event); err != nil {
				return fmt.Errorf("decode event: %w", err)
			}
			if ev.Type == wire.EventPing {
				continue
			}
		}
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// readEvents parses an event stream and calls fn for each event.
func readEvents(r io.Reader, fn func(Event) error) error {
	sr := sse.NewReader(r, 0)
	for {
		// NextRaw and the output fast path allocate only the id and the
		// text: line-framed streams carry millions of tiny events.
		f, err := sr.NextRaw()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read event stream: %w", err)
		}
		var ev Event
		if fast, ok := wire.ParseOutputEvent(f.Data); ok {
			ev.Event = fast
		} else if err := jsonUnmarshal(f.Data, &ev.Event); err != nil {
			return fmt.Errorf("decode event: %w", err)
		}
		ev.ID = string(f.ID)
		if err := fn(ev); err != nil {
			return err
		}
	}
}

// Status returns a command's status.
func (c *Client) Status(ctx context.Context, id string) (wire.CommandStatus, error) {
	var st wire.CommandStatus
	err := c.doJSON(ctx, http.MethodGet, "/command/status/"+url.PathEscape(id), nil, nil, &st)
	return st, err
}

// Logs returns a command's output from byte cursor (both streams, in
// arrival order), the cursor to pass next, and how many bytes were lost.
func (c *Client) Logs(ctx context.Context, id string, cursor int64) (data []byte, next, lost int64, err error) {
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/command/" + url.PathEscape(id) + "/logs",
		query: url.Values{"cursor": {strconv.FormatInt(cursor, 10)}}})
	if err != nil {
		return nil, 0, 0, err
	}
	defer resp.Body.Close()
	data, err = io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("read logs: %w", err)
	}
	next, _ = strconv.ParseInt(resp.Header.Get(wire.HeaderTailCursor), 10, 64)
	lost, _ = strconv.ParseInt(resp.Header.Get(wire.HeaderOutputLost), 10, 64)
	return data, next, lost, nil
}

// FollowLogs streams a command's output events from byte offset; with
// follow it continues live until the command finishes (ending with
// execution_complete, which carries the exit code; with WithLineFraming a
// failed command's stream ends with its error event instead), otherwise it
// stops after what is retained.
func (c *Client) FollowLogs(ctx context.Context, id string, offset int64, follow bool, fn func(Event) error) error {
	q := url.Values{"offset": {strconv.FormatInt(offset, 10)}}
	if follow {
		q.Set("follow", "true")
	}
	return c.stream(ctx, request{method: http.MethodGet, path: "/command/" + url.PathEscape(id) + "/logs", query: q}, nil, fn)
}

// Interrupt stops a command (SIGTERM, then SIGKILL) and returns once it
// has exited.
func (c *Client) Interrupt(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/command", url.Values{"id": {id}}, nil, nil)
}

// WriteStdin copies r to the stdin of a command started with Stdin, and
// closes its stdin when closeAfter.
func (c *Client) WriteStdin(ctx context.Context, id string, r io.Reader, closeAfter bool) error {
	q := url.Values{}
	if closeAfter {
		q.Set("close", "true")
	}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/command/" + url.PathEscape(id) + "/stdin",
		query: q, body: r, contentType: "application/octet-stream"})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.Body.Close()
}

// Signal sends a signal ("SIGTERM", "INT", "9") to a command's process
// group.
func (c *Client) Signal(ctx context.Context, id, signal string) error {
	return c.doJSON(ctx, http.MethodPost, "/command/"+url.PathEscape(id)+"/signal", nil, wire.SignalRequest{Signal: signal}, nil)
}
