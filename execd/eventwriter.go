package execd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
)

// eventWriter writes an execution stream as Server-Sent Events, or as
// binary frames (wire.MediaTypeFrames) when the client asked for them. It
// is safe for concurrent use.
type eventWriter struct {
	sse *sse.Writer
	// lines is OpenSandbox's framing (wire.FramingLines): one output event
	// per line, and a failed command's stream ends with its error event.
	// Otherwise output is byte-exact and every finished command's stream
	// ends with execution_complete.
	lines bool

	mu      sync.Mutex
	w       http.ResponseWriter
	frames  bool
	started bool
}

// newEventWriter picks the encoding from r's Accept header (frames when
// the client lists wire.MediaTypeFrames before text/event-stream) and the
// framing from its wire.QueryFraming parameter (lines unless "bytes";
// frames are always byte-exact). It writes nothing yet, so a handler can
// still answer with an error; an unknown framing is CodeInvalidRequest.
func newEventWriter(w http.ResponseWriter, r *http.Request) (*eventWriter, error) {
	lines := true
	switch f := r.URL.Query().Get(wire.QueryFraming); f {
	case "", wire.FramingLines:
	case wire.FramingBytes:
		lines = false
	default:
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s must be %q or %q, got %q", wire.QueryFraming, wire.FramingLines, wire.FramingBytes, f)
	}
	accept := r.Header.Get("Accept")
	fi := strings.Index(accept, wire.MediaTypeFrames)
	si := strings.Index(accept, "text/event-stream")
	if fi >= 0 && (si < 0 || fi < si) {
		return &eventWriter{w: w, frames: true}, nil
	}
	return &eventWriter{sse: sse.NewWriter(w), lines: lines}, nil
}

// appendLineEvent appends the SSE frame of one line-framed output event of
// stream s to dst: its id is end, the offset after the line.
func appendLineEvent(dst []byte, s outlog.Stream, text []byte, end, ts int64) []byte {
	typ := wire.EventStdout
	if s == outlog.Stderr {
		typ = wire.EventStderr
	}
	dst = append(dst, "id: "...)
	dst = strconv.AppendInt(dst, end, 10)
	dst = append(dst, "\nevent: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: "...)
	dst = wire.AppendOutputEventBytes(dst, typ, text, ts)
	return append(dst, "\n\n"...)
}

// WriteFrames writes SSE frames already encoded (appendLineEvent) with one
// write and flush. Only for SSE streams.
func (e *eventWriter) WriteFrames(b []byte) error {
	return e.sse.WriteFrames(b)
}

// Event writes one event (typ is the SSE event name; id may be empty).
func (e *eventWriter) Event(id, typ string, ev any) error {
	if !e.frames {
		return e.sse.Event(id, typ, ev)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	return e.frame(wire.FrameEvent, 0, b)
}

// Output writes a run of one stream's output; id is the offset to resume
// from after it.
func (e *eventWriter) Output(id string, s outlog.Stream, data []byte) error {
	typ, kind := wire.EventStdout, wire.FrameStdout
	if s == outlog.Stderr {
		typ, kind = wire.EventStderr, wire.FrameStderr
	}
	if !e.frames {
		buf := make([]byte, 0, len(data)+len(data)/8+64)
		return e.sse.EventJSON(id, typ, wire.AppendOutputEvent(buf, typ, string(data), nowMillis()))
	}
	off, _ := strconv.ParseUint(id, 10, 64)
	return e.frame(kind, off, data)
}

// Comment writes a keep-alive (nothing in frames mode, where the stream
// carries no comments; an empty event frame keeps proxies awake instead).
func (e *eventWriter) Comment(text string) error {
	if !e.frames {
		return e.sse.Comment(text)
	}
	return e.frame(wire.FrameEvent, 0, []byte(`{"type":"ping"}`))
}

// Flush sends the headers now.
func (e *eventWriter) Flush() {
	if !e.frames {
		e.sse.Flush()
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start()
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (e *eventWriter) start() {
	if !e.started {
		e.started = true
		e.w.Header().Set("Content-Type", wire.MediaTypeFrames)
		e.w.Header().Set("Cache-Control", "no-cache")
		e.w.Header().Set("X-Accel-Buffering", "no")
	}
}

func (e *eventWriter) frame(kind byte, off uint64, payload []byte) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.start()
	buf := make([]byte, 0, wire.FrameHeaderSize+len(payload))
	buf = wire.AppendFrameHeader(buf, kind, off, len(payload))
	buf = append(buf, payload...)
	if _, err := e.w.Write(buf); err != nil {
		return fmt.Errorf("write frame: %w", err)
	}
	if f, ok := e.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}
