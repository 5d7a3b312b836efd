// Package engine is the runtime contract between AstraBox and an agent
// program (an "engine kind"): how the program is placed in a sandbox, how
// inputs, interrupts and answers are written to it, and how every event it
// prints is classified into one closed set. It imports only the standard
// library and the platform's wire vocabulary (platform/wire), like
// sandbox/.
//
// An Adapter is a codec with no I/O of its own: the platform's runner owns
// the transport (the program runs as a long-lived execd command with a
// stdin pipe; its stdout is read by byte offset, so a new holder re-attaches
// where the last one stopped) and calls the adapter to build the launch and
// to encode and decode. That keeps every adapter testable against recorded
// fixtures (see enginetest) and the transport written once.
//
// AstraBox records what the program reports and never infers it: an input
// is consumed when the program says so, a reply ends when the program says
// so, and an event an adapter does not know is a Diagnostic.
package engine

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/astrabox/astrabox/platform/wire"
)

// Descriptor says what an engine kind is and needs; GET /api/v1/engines
// shows it. Its one declaration is the wire's (see
// wire.EngineDescriptor for the fields).
type Descriptor = wire.EngineDescriptor

// Config is what the runner knows when it (re)builds a program's runtime.
type Config struct {
	SessionID string
	// Model is the model name the program sends.
	Model string
	// ModelBaseURL is the in-box URL of AstraBox's model path (an
	// OpenAI-compatible base, ending in /v1).
	ModelBaseURL string
	// ModelKey is the per-session placeholder credential the program sends;
	// AstraBox's model path swaps it for the real key.
	ModelKey       string
	Instructions   string
	PermissionMode string
	// Tools is nil for all the program's tools.
	Tools []string
	// Workspace is the program's working directory in the box.
	Workspace string
	// NativeKey is the program's own conversation id, when it reported one.
	NativeKey string
	// Resume is true when native state was written back into the box
	// before Launch, so the program must continue that conversation.
	Resume bool
}

// File is a file the runner writes into the box before it starts the
// program.
type File struct {
	Path    string
	Content []byte
	Mode    uint32
}

// Launch is how to start the program.
type Launch struct {
	// Command is run by execd with bash -c. The environment variable
	// ASTRABOX_BIN names the AstraBox binary in the box.
	Command string
	Env     map[string]string
	Cwd     string
	Files   []File
	// StatePath is the program's native state file in the box, mirrored
	// into the store after each reply ("" when it keeps none).
	StatePath string
	// Stdin is written to the program's stdin once it started, before any
	// input (e.g. a query of its state); nil for nothing.
	Stdin []byte
}

// Input is one user input.
type Input struct {
	ID      string
	Content string
	// Busy is true when the program is working on another input (a program
	// may need a follow-up form then).
	Busy bool
}

// Answer answers an interaction the program opened.
type Answer struct {
	InteractionID string
	// Decision is "approve" or "reject" for an approval.
	Decision string
	Comment  string
	// Answers answer a question.
	Answers []string
}

// Adapter is one engine kind. Implementations are safe for concurrent use;
// a Decoder is not.
type Adapter interface {
	Descriptor() Descriptor
	// Launch returns how to start the program for cfg.
	Launch(cfg Config) (Launch, error)
	// EncodeInput, EncodeInterrupt and EncodeAnswer return the bytes to
	// write to the program's stdin (whole lines, LF-terminated).
	EncodeInput(in Input) ([]byte, error)
	EncodeInterrupt() ([]byte, error)
	EncodeAnswer(a Answer) ([]byte, error)
	// NewDecoder returns a decoder for one run of the program.
	NewDecoder() Decoder
}

// Decoder classifies the program's stdout, one line (without its LF) at a
// time, into events. It keeps whatever state the translation needs (open
// text parts, the current step).
type Decoder interface {
	Decode(line []byte) []Event
}

// ReplyResumer is a Decoder that keeps state across a reply (whether one
// is open, its open parts) and so must be told of a reply in progress
// when a new holder re-attaches to the program mid-reply: ResumeReply is
// called before the first line, with the parts the reply's log leaves
// open, so that the decoder closes them and ends the reply when the
// program does.
type ReplyResumer interface {
	ResumeReply(open []PartRef)
}

// Kind is the closed set of event kinds.
type Kind int

const (
	// Diagnostic is private to operators: never shown to clients. Unknown
	// events land here.
	Diagnostic Kind = iota
	// Frame is one AI SDK UI message stream chunk (Frame.Type names it).
	Frame
	// InputReceived: the program acknowledged an input (input.delivered).
	InputReceived
	// InputConsumed: the program took the input and starts its reply. An
	// empty InputID names the oldest input delivered to the program (for a
	// program that does not echo ids, decoded from the middle of its run).
	InputConsumed
	// InteractionRequested: an approval or question waits for an answer.
	InteractionRequested
	// ReplyEnded: the reply to the consumed input ended.
	ReplyEnded
	// StateChanged: the program's own state (ProgramState).
	StateChanged
	// NativeKey: the program's own conversation id (and whether it resumed).
	NativeKey
	// StateGrew: the native state grew; a hint to mirror it now.
	StateGrew
)

var kindNames = [...]string{"diagnostic", "frame", "input_received", "input_consumed", "interaction_requested", "reply_ended", "state_changed", "native_key", "state_grew"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "unknown"
}

// Program states a program reports.
const (
	StateWorking = "working"
	StateWaiting = "waiting"
	StateIdle    = "idle"
)

// Reply outcomes.
const (
	OutcomeCompleted   = "completed"
	OutcomeInterrupted = "interrupted"
	OutcomeFailed      = "failed"
)

// Event is one classified program event; the fields used depend on Kind.
type Event struct {
	Kind Kind
	// Chunk is a Frame's AI SDK UI chunk: a JSON object with "type".
	Chunk json.RawMessage
	// InputID names the input of InputReceived and InputConsumed.
	InputID string
	// Interaction is an InteractionRequested's request.
	Interaction *Interaction
	// End is a ReplyEnded's outcome.
	End *ReplyEnd
	// State is a StateChanged's program state.
	State string
	// Key and Resumed are a NativeKey's conversation id and whether the
	// program resumed it; Consumed lists the input ids the program's native
	// state records as consumed.
	Key      string
	Resumed  bool
	Consumed []string
	// Bytes is a StateGrew's new size of the native state.
	Bytes int64
	// Text is a Diagnostic's text (the raw line for unknown events).
	Text string
}

// Interaction is an approval or a question the program waits on: what
// the runner records as the Session's pending_interaction. Its one
// declaration is the wire's (see wire.Interaction).
type Interaction = wire.Interaction

// Usage counts a reply's model tokens.
type Usage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
}

// ReplyEnd is how a reply ended.
type ReplyEnd struct {
	InputID      string
	Outcome      string
	FinishReason string
	Usage        Usage
	// ErrorCode and ErrorMessage describe a failed reply.
	ErrorCode    string
	ErrorMessage string
}

// ErrUnknownKind is returned for an engine kind no adapter serves.
var ErrUnknownKind = errors.New("engine: unknown engine kind")

// Registry maps engine kinds to adapters.
type Registry map[string]Adapter

// Get returns the adapter of kind or an error wrapping ErrUnknownKind.
func (r Registry) Get(kind string) (Adapter, error) {
	if a, ok := r[kind]; ok {
		return a, nil
	}
	return nil, errors.Join(ErrUnknownKind, errors.New("kind "+kind))
}

// WithImage returns ad with its descriptor naming image as the one its
// program needs: for an image built or named otherwise than the kind's
// own (a registry copy, a test build).
func WithImage(ad Adapter, image string) Adapter { return imaged{ad, image} }

type imaged struct {
	Adapter
	image string
}

func (a imaged) Descriptor() Descriptor {
	d := a.Adapter.Descriptor()
	d.Image = a.image
	return d
}

// Helpers for adapters: the pieces every codec of a JSON-lines program
// writes the same way.

// JSONLine returns v as one LF-terminated JSON line, the form EncodeInput,
// EncodeInterrupt and EncodeAnswer return.
func JSONLine(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ShellQuote quotes s as one word for bash (Launch.Command runs under
// bash -c).
func ShellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// FrameOf returns a Frame event of an AI SDK UI chunk (see package
// platform/wire for the chunk types and their constructors).
func FrameOf(c wire.Chunk) Event { return Event{Kind: Frame, Chunk: c.JSON()} }
