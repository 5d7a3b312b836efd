package wire

import (
	"encoding/json"
	"time"
)

// SessionState is a Session's state (PLATFORM.md: "Session states").
type SessionState string

// The Session states.
const (
	// SessionCreating: its runtime (sandbox and program) is being built.
	SessionCreating SessionState = "CREATING"
	// SessionReady: the program waits for input.
	SessionReady SessionState = "READY"
	// SessionBusy: a reply is in progress.
	SessionBusy SessionState = "BUSY"
	// SessionInterrupting: an interrupt was asked and the reply not yet
	// ended.
	SessionInterrupting SessionState = "INTERRUPTING"
	// SessionRecoveryRequired: the runtime could not be built or resumed.
	SessionRecoveryRequired SessionState = "RECOVERY_REQUIRED"
	// SessionTerminated: the runtime was released; the next input builds
	// it again.
	SessionTerminated SessionState = "TERMINATED"
	// SessionDeleted: the Session is deleted.
	SessionDeleted SessionState = "DELETED"
)

// Decision is an approval's answer.
type Decision string

// The decisions of an approval.
const (
	DecisionApprove Decision = "approve"
	DecisionReject  Decision = "reject"
)

// SessionStates lists every Session state, in the order of their
// definition.
var SessionStates = []SessionState{SessionCreating, SessionReady, SessionBusy, SessionInterrupting,
	SessionRecoveryRequired, SessionTerminated, SessionDeleted}

// Session is a Session as the API shows it (GET /api/v1/sessions[/{id}]).
// A nullable field is a pointer: nil is JSON null. The times are UTC.
type Session struct {
	ID         string       `json:"session_id"`
	AgentID    string       `json:"agent_id"`
	EngineKind string       `json:"engine_kind"`
	State      SessionState `json:"state"`
	Title      string       `json:"title"`
	// CurrentTurnID is the turn of the reply in progress (nil: none).
	CurrentTurnID *string `json:"current_turn_id"`
	// LastSeq is the seq of the last entry of the Session's log.
	LastSeq int64 `json:"last_seq"`
	// PendingInteraction is the approval or question the reply in
	// progress waits for (nil: none).
	PendingInteraction *Interaction `json:"pending_interaction"`
	// PendingInputs are the inputs accepted and not yet consumed, in
	// order (never null).
	PendingInputs []PendingInput `json:"pending_inputs"`
	// SandboxID is the Session's box, an ordinary sandbox of the sandbox
	// API (nil: none now).
	SandboxID *string        `json:"sandbox_id"`
	Runtime   SessionRuntime `json:"runtime"`
	// OwnerID is the user that opened the conversation, whose Session
	// (and sandbox) it is ("" for one opened by the server itself).
	OwnerID   string    `json:"owner_id"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// PendingInput is an input accepted and not yet consumed: its ids, the
// seq of its input.accepted event and its state ("accepted" or
// "delivered").
type PendingInput struct {
	InputID string `json:"input_id"`
	TurnID  string `json:"turn_id"`
	Seq     int64  `json:"seq"`
	State   string `json:"state"`
}

// SessionRuntime says which replica holds a Session's runtime (its
// lease). Holder and LeaseExpiresAt are nil when State is RuntimeNone.
type SessionRuntime struct {
	// State is RuntimeNone, RuntimeHeld or RuntimeExpired.
	State          string     `json:"state"`
	Holder         *string    `json:"holder"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
}

// The states of a SessionRuntime.
const (
	// RuntimeNone: no replica holds the runtime.
	RuntimeNone = "none"
	// RuntimeHeld: Holder holds it until LeaseExpiresAt.
	RuntimeHeld = "held"
	// RuntimeExpired: Holder's lease lapsed; another replica may take the
	// runtime over.
	RuntimeExpired = "expired"
)

// ConversationRequest is the body of POST
// /api/v1/agents/{id}/conversations.
type ConversationRequest struct {
	Title string `json:"title,omitempty"`
}

// Conversation answers POST /api/v1/agents/{id}/conversations: the
// Session opened.
type Conversation struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	// Replayed is not on the wire: the status says it (200, not 201).
	// It is true when a repeated Idempotency-Key was answered with the
	// Session the first call created; the SDK sets it.
	Replayed bool `json:"-"`
}

// TurnInput is the body of POST /api/v1/sessions/{id}/turn-inputs. A
// non-empty ClientMessageID makes the call safe to retry.
type TurnInput struct {
	Content         string `json:"content"`
	ClientMessageID string `json:"client_message_id,omitempty"`
}

// Receipt acknowledges an input (the answer of POST
// /api/v1/sessions/{id}/turn-inputs). Seq is the log seq of its
// input.accepted event; State is the input's current state ("accepted",
// "delivered", "consumed", "answered" or "failed"; PLATFORM.md "Inputs
// exactly once").
type Receipt struct {
	InputID         string `json:"input_id"`
	TurnID          string `json:"turn_id"`
	ClientMessageID string `json:"client_message_id"`
	Seq             int64  `json:"seq"`
	State           string `json:"state"`
	// Repeated is not on the wire: the status says it (200, not 201). It
	// is true when ClientMessageID was sent before: the receipt is the
	// first one's and nothing was recorded again. The server's
	// platform.Sessions and the SDK set it.
	Repeated bool `json:"-"`
}

// The kinds of an Interaction.
const (
	InteractionApproval = "approval"
	InteractionQuestion = "question"
)

// Interaction is an approval or a question a reply waits for: a Session's
// pending_interaction, the data of a data-interaction chunk and of the
// interaction.opened event. The engine adapters report it
// (engine.Interaction is this type).
type Interaction struct {
	ID string `json:"interaction_id"`
	// Kind is InteractionApproval or InteractionQuestion.
	Kind       string          `json:"kind"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	// Questions are a question's prompts.
	Questions []string `json:"questions,omitempty"`
}

// Answer answers an Interaction: Decision (with an optional Comment) for
// an approval, Answers (one per question) for a question.
type Answer struct {
	Decision Decision `json:"decision,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	Answers  []string `json:"answers,omitempty"`
}

// RespondRequest is the body of POST
// /api/v1/sessions/{id}/interaction-respond (INTERACTION_CLOSED when
// InteractionID is not the one open).
type RespondRequest struct {
	InteractionID string `json:"interaction_id"`
	Answer        Answer `json:"answer"`
}

// InterruptResult answers POST /api/v1/sessions/{id}/interrupt: Status is
// InterruptAccepted when a reply was in progress, else InterruptNoop.
type InterruptResult struct {
	Status string `json:"status"`
}

// The statuses of an InterruptResult.
const (
	InterruptAccepted = "accepted"
	InterruptNoop     = "noop"
)
