package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Command types read from stdin (docs/agent-protocol.md, "Commands").
const (
	cmdInput     = "input"
	cmdInterrupt = "interrupt"
	cmdAnswer    = "answer"
)

// Program states reported by the "state" event.
const (
	stateWorking = "working"
	stateWaiting = "waiting"
	stateIdle    = "idle"
)

// Reply outcomes reported by the "turn.end" event.
const (
	outcomeCompleted   = "completed"
	outcomeInterrupted = "interrupted"
	outcomeFailed      = "failed"
)

// maxCommandLine bounds one stdin line; a longer line is discarded whole.
const maxCommandLine = 16 << 20

// command is one stdin line. Unknown fields are ignored.
type command struct {
	Type          string `json:"type"`
	ID            string `json:"id"`
	Content       string `json:"content"`
	InteractionID string `json:"interaction_id"`
	Decision      string `json:"decision"`
	Comment       string `json:"comment"`
}

// The events written to stdout. Each is one JSON object on one line; the
// fields that the protocol always carries are never omitted.
type (
	readyEvent struct {
		Type           string   `json:"type"`
		ConversationID string   `json:"conversation_id"`
		Resumed        bool     `json:"resumed"`
		Messages       int      `json:"messages"`
		Inputs         []string `json:"inputs"`
	}
	// idEvent serves every event that carries only an id: input.received,
	// input.consumed, text.start, text.end, reasoning.start, reasoning.end.
	idEvent struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	}
	typeEvent struct {
		Type string `json:"type"`
	}
	stateEvent struct {
		Type  string `json:"type"`
		State string `json:"state"`
	}
	deltaEvent struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Delta string `json:"delta"`
	}
	toolStartEvent struct {
		Type string `json:"type"`
		ID   string `json:"id"`
		Name string `json:"name"`
	}
	toolCallEvent struct {
		Type  string          `json:"type"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}
	approvalEvent struct {
		Type          string          `json:"type"`
		InteractionID string          `json:"interaction_id"`
		ToolCallID    string          `json:"tool_call_id"`
		Name          string          `json:"name"`
		Input         json.RawMessage `json:"input"`
	}
	toolResultEvent struct {
		Type   string          `json:"type"`
		ID     string          `json:"id"`
		Output json.RawMessage `json:"output"`
	}
	// modelRetryEvent: a model call broke (the connection, not the model)
	// and is made again after DelayMS; AfterOutput says the broken call
	// had streamed part of its answer, which the retry replaces.
	modelRetryEvent struct {
		Type        string `json:"type"`
		Attempt     int    `json:"attempt"`
		MaxAttempts int    `json:"max_attempts"`
		DelayMS     int64  `json:"delay_ms"`
		Error       string `json:"error"`
		AfterOutput bool   `json:"after_output"`
	}
	toolErrorEvent struct {
		Type  string `json:"type"`
		ID    string `json:"id"`
		Error string `json:"error"`
	}
	toolDeniedEvent struct {
		Type   string `json:"type"`
		ID     string `json:"id"`
		Reason string `json:"reason"`
	}
	turnEndEvent struct {
		Type         string     `json:"type"`
		InputID      string     `json:"input_id"`
		Outcome      string     `json:"outcome"`
		FinishReason string     `json:"finish_reason"`
		Usage        usage      `json:"usage"`
		Error        *turnError `json:"error,omitempty"`
	}
	savedEvent struct {
		Type  string `json:"type"`
		Bytes int64  `json:"bytes"`
	}
	logEvent struct {
		Type    string `json:"type"`
		Level   string `json:"level"`
		Message string `json:"message"`
	}
)

// usage counts a reply's model tokens, summed over its model calls.
type usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// turnError is the error of a failed reply. Message never holds the model
// credential.
type turnError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// emitter writes events as JSON lines. Writes are serialized, so each event
// reaches stdout whole; after close, or after the first failed write, it
// writes nothing more and err reports why.
type emitter struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
	failed error
}

func newEmitter(w io.Writer) *emitter { return &emitter{w: w} }

// emit writes ev as one line.
func (e *emitter) emit(ev any) {
	b, err := json.Marshal(ev)
	if err != nil {
		// Every event is built from plain fields; this is a programming error.
		panic(fmt.Sprintf("agent: encode event %T: %v", ev, err))
	}
	b = append(b, '\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.failed != nil {
		return
	}
	if _, err := e.w.Write(b); err != nil {
		e.failed = fmt.Errorf("write event: %w", err)
	}
}

// err returns the first write error.
func (e *emitter) err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.failed
}

// close stops all further writes.
func (e *emitter) close() {
	e.mu.Lock()
	e.closed = true
	e.mu.Unlock()
}

// errLineTooLong reports a stdin line over maxCommandLine bytes; the line
// was consumed and the reader can go on.
var errLineTooLong = errors.New("command line too long")

// readLine returns the next LF-terminated line without its LF, splitting on
// LF only (a CR, or a U+2028 inside a JSON string, is part of the line). A
// last line without LF is returned with io.EOF. A line over limit bytes is
// read to its end and discarded with errLineTooLong.
func readLine(r *bufio.Reader, limit int) ([]byte, error) {
	var buf []byte
	tooLong := false
	for {
		part, err := r.ReadSlice('\n')
		if !tooLong {
			if len(buf)+len(part) > limit+1 {
				tooLong, buf = true, nil
			} else {
				buf = append(buf, part...)
			}
		}
		switch {
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err != nil && tooLong:
			return nil, errors.Join(errLineTooLong, err)
		case err != nil:
			return buf, err
		case tooLong:
			return nil, errLineTooLong
		default:
			return bytes.TrimSuffix(buf, []byte{'\n'}), nil
		}
	}
}
