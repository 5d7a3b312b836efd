// Package wire is the agent platform's wire vocabulary, standard library
// only, shared by every side that writes or reads it: the engine adapters,
// the runner, the HTTP edge, the SDK and the CLI. It holds the AI SDK UI
// message stream's chunk types and the constructors of the chunks the
// platform writes (a Session's replies are such a stream, see PLATFORM.md),
// a Session's states, and the one declaration of the bodies of the /api/v1
// routes: Agents and engines (agent.go), Sessions, inputs and
// interactions (session.go), vaults (vault.go) and folded messages
// (messages.go). The server (package platform) builds them from its
// records, the SDK (package client) names them, and the console's
// TypeScript declarations are checked against them (console_types_test.go).
//
// Encoding: a field that may be JSON null is a pointer (or a slice); a
// time is a time.Time in UTC, RFC 3339 with up to microseconds.
// RuntimeProfiles are not here: their declaration is the sandbox layer's
// (lifecycle.Profile).
package wire

import "encoding/json"

// HeaderStreamAfter is the ai-stream response header naming the log
// position the stream reads after. A client that asked for the reply in
// progress (follow=session, no after_seq) and lost the connection before
// its first frame reconnects with after_seq set to it, and so keeps its
// place: the same reply, or the next one, never a later one.
const HeaderStreamAfter = "X-AstraBox-After-Seq"

// ChunkType is the "type" of an AI SDK UI message stream chunk.
type ChunkType string

// The chunk types of the AI SDK UI message stream protocol.
const (
	ChunkStart               ChunkType = "start"
	ChunkFinish              ChunkType = "finish"
	ChunkStartStep           ChunkType = "start-step"
	ChunkFinishStep          ChunkType = "finish-step"
	ChunkTextStart           ChunkType = "text-start"
	ChunkTextDelta           ChunkType = "text-delta"
	ChunkTextEnd             ChunkType = "text-end"
	ChunkReasoningStart      ChunkType = "reasoning-start"
	ChunkReasoningDelta      ChunkType = "reasoning-delta"
	ChunkReasoningEnd        ChunkType = "reasoning-end"
	ChunkToolInputStart      ChunkType = "tool-input-start"
	ChunkToolInputDelta      ChunkType = "tool-input-delta"
	ChunkToolInputAvailable  ChunkType = "tool-input-available"
	ChunkToolInputError      ChunkType = "tool-input-error"
	ChunkToolOutputAvailable ChunkType = "tool-output-available"
	ChunkToolOutputError     ChunkType = "tool-output-error"
	ChunkToolOutputDenied    ChunkType = "tool-output-denied"
	ChunkToolApproval        ChunkType = "tool-approval-request"
	ChunkSourceURL           ChunkType = "source-url"
	ChunkSourceDocument      ChunkType = "source-document"
	ChunkFile                ChunkType = "file"
	ChunkError               ChunkType = "error"
)

// The data-* chunk types the platform writes (the protocol leaves data-*
// open: a client that does not know one ignores it).
const (
	// DataTurnAccepted opens a reply: {turnId, inputId}.
	DataTurnAccepted ChunkType = "data-turn-accepted"
	// DataInputConsumed: the program took the reply's input, {inputId}.
	DataInputConsumed ChunkType = "data-input-consumed"
	// DataInteraction is an approval or question the reply waits for.
	DataInteraction ChunkType = "data-interaction"
	// DataTurnFailure: the reply failed, {code, message}.
	DataTurnFailure ChunkType = "data-turn-failure"
	// DataTurnInterrupted: the reply was interrupted, {turnId}.
	DataTurnInterrupted ChunkType = "data-turn-interrupted"
	// DataResult closes a reply that was not failed: {usage, outcome}.
	DataResult ChunkType = "data-result"
	// DataResumeCursor (transient) tells a resumed stream where it is.
	DataResumeCursor ChunkType = "data-resume-cursor"
	// DataRetry, DataCompaction and DataModelError (transient) report a
	// program's model retries, context compactions and model errors.
	DataRetry      ChunkType = "data-retry"
	DataCompaction ChunkType = "data-compaction"
	DataModelError ChunkType = "data-model-error"
	// DataStepBroken: the way to the model broke off after part of a
	// model call's answer streamed, and the call is made again: {attempt,
	// maxAttempts, delayMs, error}. What came before it in the message is
	// the broken call's, replaced by what follows.
	DataStepBroken ChunkType = "data-step-broken"
)

// IsData reports a data-* chunk type.
func (t ChunkType) IsData() bool { return len(t) > 5 && t[:5] == "data-" }

// Known reports a chunk type of the protocol (data-* types included).
func (t ChunkType) Known() bool {
	switch t {
	case ChunkStart, ChunkFinish, ChunkStartStep, ChunkFinishStep, ChunkTextStart, ChunkTextDelta, ChunkTextEnd,
		ChunkReasoningStart, ChunkReasoningDelta, ChunkReasoningEnd, ChunkToolInputStart, ChunkToolInputDelta,
		ChunkToolInputAvailable, ChunkToolInputError, ChunkToolOutputAvailable, ChunkToolOutputError,
		ChunkToolOutputDenied, ChunkToolApproval, ChunkSourceURL, ChunkSourceDocument, ChunkFile, ChunkError:
		return true
	}
	return t.IsData()
}

// PartKind is the kind of a streamed part: text or reasoning.
type PartKind string

const (
	PartText      PartKind = "text"
	PartReasoning PartKind = "reasoning"
)

// Start, Delta and End are the chunk types of a part of kind k.
func (k PartKind) Start() ChunkType { return ChunkType(k) + "-start" }
func (k PartKind) Delta() ChunkType { return ChunkType(k) + "-delta" }
func (k PartKind) End() ChunkType   { return ChunkType(k) + "-end" }

// Chunk is one chunk as it is written: "type" and the type's fields.
type Chunk map[string]any

// Type returns the chunk's type.
func (c Chunk) Type() ChunkType {
	switch t := c["type"].(type) {
	case ChunkType:
		return t
	case string:
		return ChunkType(t)
	}
	return ""
}

// JSON returns the chunk encoded (a Chunk holds only JSON values).
func (c Chunk) JSON() json.RawMessage {
	b, _ := json.Marshal(c)
	return b
}

// NewChunk returns a chunk of type t with fields (which it owns).
func NewChunk(t ChunkType, fields map[string]any) Chunk {
	c := Chunk(fields)
	if c == nil {
		c = Chunk{}
	}
	c["type"] = t
	return c
}

// Data returns a data-* chunk of type t carrying data.
func Data(t ChunkType, data any) Chunk { return Chunk{"type": t, "data": data} }

// Transient returns a data-* chunk that a client shows while it streams
// but does not keep in the message (transient: true).
func Transient(t ChunkType, data any) Chunk { return Chunk{"type": t, "transient": true, "data": data} }

// Start opens a reply's message.
func Start(messageID string, metadata map[string]any) Chunk {
	return Chunk{"type": ChunkStart, "messageId": messageID, "messageMetadata": metadata}
}

// Finish closes a reply's message; reason is one of the AI SDK's finish
// reasons (stop, length, content-filter, tool-calls, error, other).
func Finish(reason string) Chunk { return Chunk{"type": ChunkFinish, "finishReason": reason} }

// StartStep and FinishStep bracket one model call and its tool runs.
func StartStep() Chunk  { return Chunk{"type": ChunkStartStep} }
func FinishStep() Chunk { return Chunk{"type": ChunkFinishStep} }

// PartStart, PartDelta and PartEnd stream part id of kind k.
func PartStart(k PartKind, id string) Chunk { return Chunk{"type": k.Start(), "id": id} }
func PartDelta(k PartKind, id, delta string) Chunk {
	return Chunk{"type": k.Delta(), "id": id, "delta": delta}
}
func PartEnd(k PartKind, id string) Chunk { return Chunk{"type": k.End(), "id": id} }

// The tool chunks of a dynamic tool (one the program, not the client,
// declares): its input streaming, given whole, and its outcome.
func ToolInputStart(callID, name string) Chunk {
	return Chunk{"type": ChunkToolInputStart, "toolCallId": callID, "toolName": name, "dynamic": true}
}
func ToolInputDelta(callID, delta string) Chunk {
	return Chunk{"type": ChunkToolInputDelta, "toolCallId": callID, "inputTextDelta": delta}
}
func ToolInputAvailable(callID, name string, input json.RawMessage) Chunk {
	return Chunk{"type": ChunkToolInputAvailable, "toolCallId": callID, "toolName": name, "input": orNull(input), "dynamic": true}
}

// ToolOutput is a call's result; a preliminary one (a running tool's
// progress) may be followed by others and the final one.
func ToolOutput(callID string, output json.RawMessage, preliminary bool) Chunk {
	c := Chunk{"type": ChunkToolOutputAvailable, "toolCallId": callID, "output": orNull(output), "dynamic": true}
	if preliminary {
		c["preliminary"] = true
	}
	return c
}
func ToolOutputError(callID, text string) Chunk {
	return Chunk{"type": ChunkToolOutputError, "toolCallId": callID, "errorText": text, "dynamic": true}
}
func ToolOutputDenied(callID string) Chunk {
	return Chunk{"type": ChunkToolOutputDenied, "toolCallId": callID}
}
func ToolApprovalRequest(approvalID, callID string) Chunk {
	return Chunk{"type": ChunkToolApproval, "approvalId": approvalID, "toolCallId": callID}
}

// orNull is m, or JSON null when m is empty (a field that must be
// present).
func orNull(m json.RawMessage) json.RawMessage {
	if len(m) == 0 {
		return json.RawMessage("null")
	}
	return m
}
