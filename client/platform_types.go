package client

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The wire types of the agent platform's /api/v1 routes (PLATFORM.md).

// Session states (wire.SessionState; PLATFORM.md).
const (
	SessionCreating         = string(wire.SessionCreating)
	SessionReady            = string(wire.SessionReady)
	SessionBusy             = string(wire.SessionBusy)
	SessionInterrupting     = string(wire.SessionInterrupting)
	SessionRecoveryRequired = string(wire.SessionRecoveryRequired)
	SessionTerminated       = string(wire.SessionTerminated)
	SessionDeleted          = string(wire.SessionDeleted)
)

// Decisions of an approval (wire.Decision).
const (
	DecisionApprove = string(wire.DecisionApprove)
	DecisionReject  = string(wire.DecisionReject)
)

// Engine is an installed agent program.
type Engine struct {
	Kind            string   `json:"kind"`
	Title           string   `json:"title"`
	PermissionModes []string `json:"permission_modes"`
	ModelAPI        string   `json:"model_api"`
	StateFormat     string   `json:"state_format"`
	Capabilities    []string `json:"capabilities"`
	// Tools the program offers; an Agent's tools are a subset.
	Tools []string `json:"tools,omitempty"`
	// Image is the image the program needs ("": any image).
	Image string `json:"image,omitempty"`
	// Images says per enabled backend whether that image is present.
	Images map[string]bool `json:"images"`
}

// RuntimeProfile is a stored profile with every field, the sandbox ones
// (backend, image, resources, ...) and the agent platform's (engine kinds,
// model endpoint, workspace).
type RuntimeProfile struct {
	Name         string               `json:"name"`
	Backend      string               `json:"backend,omitempty"`
	Image        string               `json:"image,omitempty"`
	Resources    sandbox.Resources    `json:"resources"`
	Network      sandbox.NetworkMode  `json:"network,omitempty"`
	Capabilities []sandbox.Capability `json:"capabilities,omitempty"`
	Env          map[string]string    `json:"env,omitempty"`
	Entrypoint   []string             `json:"entrypoint,omitempty"`
	Runtime      string               `json:"runtime,omitempty"`
	PoolSize     int                  `json:"poolSize,omitempty"`
	// TimeoutSeconds is the lifetime of the profile's boxes; 0: none.
	TimeoutSeconds int64 `json:"timeout,omitempty"`
	// IdleTimeoutSeconds releases an idle box; 0: never.
	IdleTimeoutSeconds int64          `json:"idleTimeout,omitempty"`
	EngineKinds        []string       `json:"engine_kinds,omitempty"`
	Model              *ModelEndpoint `json:"model,omitempty"`
	Workspace          *Workspace     `json:"workspace,omitempty"`
	// SessionLimits bound what each Session on the profile may cost the
	// server (nil: the server's defaults).
	SessionLimits *SessionLimits `json:"session_limits,omitempty"`
	// Version is the stored record's version. PutRuntimeProfile with a
	// non-zero Version updates only that version (VERSION_CONFLICT).
	Version int64 `json:"version,omitempty"`
	// APIKeySet (output only) reports a stored model key.
	APIKeySet bool `json:"api_key_set,omitempty"`
}

// ModelEndpoint is an OpenAI-compatible model endpoint. APIKey is
// write-only: the server seals it and never returns it; a put without one
// keeps the stored key.
type ModelEndpoint struct {
	BaseURL string   `json:"base_url"`
	API     string   `json:"api,omitempty"`
	APIKey  string   `json:"api_key,omitempty"`
	Models  []string `json:"models,omitempty"`
}

// Workspace says whether a profile's /workspace outlives its boxes.
type Workspace struct {
	Persistent bool `json:"persistent"`
}

// SessionLimits bound what one Session may cost the server; a zero field
// takes the server's default. Past NativeStateBytes the program's native
// state is no longer saved (NATIVE_STATE_TOO_LARGE, a native_state.refused
// event); past another the reply in progress ends as failed with
// REPLY_BYTES_EXCEEDED, REPLY_FRAMES_EXCEEDED, SESSION_BYTES_EXCEEDED or
// FRAME_RATE_EXCEEDED.
type SessionLimits struct {
	NativeStateBytes int64 `json:"native_state_bytes,omitempty"`
	ReplyBytes       int64 `json:"reply_bytes,omitempty"`
	ReplyFrames      int64 `json:"reply_frames,omitempty"`
	SessionBytes     int64 `json:"session_bytes,omitempty"`
	FramesPerSecond  int64 `json:"frames_per_second,omitempty"`
}

// Agent is a stored Agent.
type Agent struct {
	ID             string    `json:"agent_id"`
	Name           string    `json:"name"`
	EngineKind     string    `json:"engine_kind"`
	RuntimeProfile string    `json:"runtime_profile"`
	Model          string    `json:"model"`
	Instructions   string    `json:"instructions"`
	PermissionMode string    `json:"permission_mode"`
	Tools          []string  `json:"tools"`
	VaultIDs       []string  `json:"vault_ids"`
	Version        int64     `json:"version"`
	CreatedAt      time.Time `json:"created_at"`
	UpdatedAt      time.Time `json:"updated_at"`
}

// AgentRequest creates an Agent or replaces one's fields. Empty
// EngineKind, PermissionMode and Model take the server's defaults
// ("astrabox", the engine's first mode, the profile's first model); a
// non-nil Version on update changes only that version (VERSION_CONFLICT).
type AgentRequest struct {
	Name           string   `json:"name"`
	EngineKind     string   `json:"engine_kind,omitempty"`
	RuntimeProfile string   `json:"runtime_profile"`
	Model          string   `json:"model,omitempty"`
	Instructions   string   `json:"instructions,omitempty"`
	PermissionMode string   `json:"permission_mode,omitempty"`
	Tools          []string `json:"tools,omitempty"`
	VaultIDs       []string `json:"vault_ids,omitempty"`
	Version        *int64   `json:"version,omitempty"`
}

// PageOptions pick a page of a list: at most Limit items (0: the server's
// default) after Cursor (a previous page's NextCursor; "" for the first).
type PageOptions struct {
	Limit  int
	Cursor string
}

func (p PageOptions) query() url.Values {
	q := url.Values{}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		q.Set("cursor", p.Cursor)
	}
	return q
}

// Page is one page of a list; NextCursor is "" on the last page.
type Page[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"next_cursor"`
}

// Session is a conversation with an Agent.
type Session struct {
	ID            string `json:"session_id"`
	AgentID       string `json:"agent_id"`
	EngineKind    string `json:"engine_kind"`
	State         string `json:"state"`
	Title         string `json:"title"`
	CurrentTurnID string `json:"current_turn_id"`
	// LastSeq is the seq of the last entry of the Session's log.
	LastSeq int64 `json:"last_seq"`
	// PendingInteraction is the approval or question the reply in
	// progress waits for, or nil.
	PendingInteraction *Interaction   `json:"pending_interaction"`
	PendingInputs      []PendingInput `json:"pending_inputs"`
	SandboxID          string         `json:"sandbox_id"`
	Runtime            SessionRuntime `json:"runtime"`
	CreatedAt          time.Time      `json:"created_at"`
	UpdatedAt          time.Time      `json:"updated_at"`
}

// SessionRuntime says which replica holds a Session's runtime.
type SessionRuntime struct {
	// State is "none", "held" or "expired".
	State          string     `json:"state"`
	Holder         string     `json:"holder"`
	LeaseExpiresAt *time.Time `json:"lease_expires_at"`
}

// PendingInput is an input accepted but not yet consumed.
type PendingInput struct {
	InputID string `json:"input_id"`
	TurnID  string `json:"turn_id"`
	Seq     int64  `json:"seq"`
	State   string `json:"state"`
}

// Interaction is an approval or a question a reply waits for.
type Interaction struct {
	ID string `json:"interaction_id"`
	// Kind is "approval" or "question".
	Kind       string          `json:"kind"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolName   string          `json:"tool_name,omitempty"`
	Input      json.RawMessage `json:"input,omitempty"`
	Questions  []string        `json:"questions,omitempty"`
}

// Answer answers an Interaction: Decision (DecisionApprove or
// DecisionReject) with an optional Comment for an approval, Answers (one
// per question) for a question.
type Answer struct {
	Decision string   `json:"decision,omitempty"`
	Comment  string   `json:"comment,omitempty"`
	Answers  []string `json:"answers,omitempty"`
}

// Conversation is a Session opened by CreateConversation.
type Conversation struct {
	SessionID string `json:"session_id"`
	AgentID   string `json:"agent_id"`
	// Replayed is true when the server answered a repeated
	// Idempotency-Key with the Session it created the first time.
	Replayed bool `json:"-"`
}

// ConversationOptions are CreateConversation's optional fields.
type ConversationOptions struct {
	Title string
	// IdempotencyKey makes a retried call return the first call's
	// Session; the same key with another title is IDEMPOTENCY_KEY_REUSED.
	IdempotencyKey string
}

// Receipt acknowledges an input. Seq is the log seq of its
// input.accepted event; State is the input's current state.
type Receipt struct {
	InputID         string `json:"input_id"`
	TurnID          string `json:"turn_id"`
	ClientMessageID string `json:"client_message_id"`
	Seq             int64  `json:"seq"`
	State           string `json:"state"`
	// Repeated is true when clientMessageID was sent before: the receipt
	// is the first one's, and the input was not recorded again.
	Repeated bool `json:"-"`
}

// Transcript is a Session's log, or a page of it, folded into AI SDK UI
// messages.
type Transcript struct {
	Messages []UIMessage `json:"messages"`
	// FirstSeq is the seq of the first log entry folded in (0 when none):
	// over 1, earlier entries are on the page before it.
	FirstSeq int64 `json:"first_seq"`
	// LastSeq is the seq of the last log entry folded in.
	LastSeq int64 `json:"last_seq"`
}

// UIMessage is an AI SDK UI message: a user message per input (its ID is
// the input id) and an assistant message per reply.
type UIMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata map[string]any   `json:"metadata,omitempty"`
	Parts    []map[string]any `json:"parts"`
}

// Text returns the message's text parts joined.
func (m UIMessage) Text() string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p["type"] == "text" {
			s, _ := p["text"].(string)
			b.WriteString(s)
		}
	}
	return b.String()
}
