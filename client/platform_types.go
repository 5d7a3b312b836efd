package client

import (
	"net/url"
	"strconv"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The wire types of the agent platform's /api/v1 routes (PLATFORM.md).
// Their one declaration is in package platform/wire, which the server
// writes them with; the names below are aliases of them, so that SDK users
// write client.Session, client.Agent and so on. RuntimeProfile and its
// parts are the SDK's own (see RuntimeProfile).

// Session states (wire.SessionState; PLATFORM.md).
const (
	SessionCreating         = wire.SessionCreating
	SessionReady            = wire.SessionReady
	SessionBusy             = wire.SessionBusy
	SessionInterrupting     = wire.SessionInterrupting
	SessionRecoveryRequired = wire.SessionRecoveryRequired
	SessionTerminated       = wire.SessionTerminated
	SessionDeleted          = wire.SessionDeleted
)

// Decisions of an approval (wire.Decision).
const (
	DecisionApprove = wire.DecisionApprove
	DecisionReject  = wire.DecisionReject
)

type (
	// SessionState is a Session's state.
	SessionState = wire.SessionState
	// Decision is an approval's answer.
	Decision = wire.Decision
	// Engine is an installed agent program, with per enabled backend
	// whether the image it needs is present.
	Engine = wire.Engine
	// Agent is a stored Agent.
	Agent = wire.Agent
	// AgentRequest creates an Agent or replaces one's fields (see
	// wire.AgentRequest for the defaults and Version).
	AgentRequest = wire.AgentRequest
	// AgentAccess is who sees and manages an Agent: its visibility
	// (VisibilityPrivate, VisibilityShared, VisibilityPublic), the users
	// a shared Agent is shared with, and its admins besides its owner.
	AgentAccess = wire.AgentAccess
	// Session is a conversation with an Agent; its nullable fields are
	// pointers (nil: JSON null).
	Session = wire.Session
	// SessionRuntime says which replica holds a Session's runtime.
	SessionRuntime = wire.SessionRuntime
	// PendingInput is an input accepted but not yet consumed.
	PendingInput = wire.PendingInput
	// Interaction is an approval or a question a reply waits for.
	Interaction = wire.Interaction
	// Answer answers an Interaction: Decision (DecisionApprove or
	// DecisionReject) with an optional Comment for an approval, Answers
	// (one per question) for a question.
	Answer = wire.Answer
	// Conversation is a Session opened by CreateConversation; Replayed
	// says a repeated Idempotency-Key was answered with the first call's
	// Session.
	Conversation = wire.Conversation
	// Receipt acknowledges an input; Repeated says its clientMessageID
	// was sent before (the receipt is the first one's).
	Receipt = wire.Receipt
	// Transcript is a Session's log, or a page of it, folded into AI SDK
	// UI messages.
	Transcript = wire.Transcript
	// UIMessage is an AI SDK UI message: a user message per input (its ID
	// is the input id) and an assistant message per reply.
	UIMessage = wire.UIMessage
)

// RuntimeProfile is a stored profile with every field, the sandbox ones
// (backend, image, resources, ...) and the agent platform's (engine kinds,
// model endpoint, workspace). The server's declaration is the sandbox
// layer's (lifecycle.Profile, which builds on package sandbox and may not
// import the platform's wire), so this one mirrors it: a test checks that
// their JSON keys agree.
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
	// Retries is how often a request that failed before its answer began
	// (429, a 5xx, a connection refused or reset) is sent again (nil: the
	// server's default, 3; 0: never; at most 10).
	Retries *int `json:"retries,omitempty"`
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

// ConversationOptions are CreateConversation's optional fields.
type ConversationOptions struct {
	Title string
	// IdempotencyKey makes a retried call return the first call's
	// Session; the same key with another title is IDEMPOTENCY_KEY_REUSED.
	IdempotencyKey string
}
