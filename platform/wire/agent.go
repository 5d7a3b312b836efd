package wire

import "time"

// The wire types of the catalog's /api/v1 routes (PLATFORM.md, "Routes"):
// the installed agent programs and Agents. The server writes them and the
// SDK (package client) reads them: each is declared here once.

// EngineDescriptor says what an engine kind (an agent program) is and
// needs. An adapter declares it (engine.Descriptor is this type); GET
// /api/v1/engines shows it, with the images (Engine).
type EngineDescriptor struct {
	Kind string `json:"kind"`
	// Title is a human name ("AstraBox agent", "pi").
	Title string `json:"title"`
	// PermissionModes the program supports ("auto", "ask"); the first is
	// an Agent's default.
	PermissionModes []string `json:"permission_modes"`
	// ModelAPI is the model wire it speaks ("openai-chat").
	ModelAPI string `json:"model_api"`
	// StateFormat names the native state ("jsonl").
	StateFormat string `json:"state_format"`
	// Capabilities are features beyond the basics ("tools", "approvals",
	// "reasoning", "interrupt", "resume").
	Capabilities []string `json:"capabilities"`
	// Tools the program offers; an Agent's tools are a subset.
	Tools []string `json:"tools,omitempty"`
	// Image is the image the program needs ("" runs in any image: the
	// program ships inside the AstraBox binary).
	Image string `json:"image,omitempty"`
	// SerialInputs is true for a program that must be handed one input at
	// a time: the next only once the reply to the last one ended (a
	// program whose own queue does not keep the order the runner needs).
	SerialInputs bool `json:"serial_inputs,omitempty"`
}

// Engine is an installed engine kind as GET /api/v1/engines lists it: its
// descriptor and, per enabled backend, whether the image its program
// needs is present (always true for a program that needs no image).
type Engine struct {
	EngineDescriptor
	Images map[string]bool `json:"images"`
}

// Agent is an Agent as the API shows it (the answer of POST, GET and PUT
// /api/v1/agents[/{id}]). Tools and VaultIDs are never null (empty lists);
// the times are UTC.
type Agent struct {
	ID             string `json:"agent_id"`
	Name           string `json:"name"`
	EngineKind     string `json:"engine_kind"`
	RuntimeProfile string `json:"runtime_profile"`
	// Model is the model name sent to the profile's endpoint.
	Model          string   `json:"model"`
	Instructions   string   `json:"instructions"`
	PermissionMode string   `json:"permission_mode"`
	Tools          []string `json:"tools"`
	VaultIDs       []string `json:"vault_ids"`
	// OwnerID is the user that made the Agent ("" for one made by the
	// server itself).
	OwnerID string `json:"owner_id"`
	// Visibility, AllowedUserIDs and Admins say who may see, use and
	// manage the Agent (AgentAccess); the lists are never null.
	Visibility     string   `json:"visibility"`
	AllowedUserIDs []string `json:"allowed_user_ids"`
	Admins         []string `json:"admins"`
	// Version is the stored record's version (AgentRequest.Version).
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// The visibilities of an Agent (AgentAccess.Visibility).
const (
	// VisibilityPrivate: only its owner, its admins and administrators
	// see it.
	VisibilityPrivate = "private"
	// VisibilityShared: also the users of AllowedUserIDs.
	VisibilityShared = "shared"
	// VisibilityPublic: also every user of its owner's organization.
	VisibilityPublic = "public"
)

// AgentAccess says who may see, use and manage an Agent: the body and
// answer of PUT /api/v1/agents/{id}/access and the answer of GET. Who may
// see an Agent may open conversations with it (each Session is its
// opener's); its owner, the users of Admins and administrators manage it
// (update, delete, change its access). The lists are never null in an
// answer.
type AgentAccess struct {
	// Visibility is VisibilityPrivate, VisibilityShared or
	// VisibilityPublic.
	Visibility string `json:"visibility"`
	// AllowedUserIDs are the users a shared Agent is shared with.
	AllowedUserIDs []string `json:"allowed_user_ids"`
	// Admins are the users besides its owner who manage the Agent.
	Admins []string `json:"admins"`
}

// AgentRequest is the body of POST /api/v1/agents (create) and PUT
// /api/v1/agents/{id} (replace every field). Empty EngineKind,
// PermissionMode and Model take the server's defaults ("astrabox", the
// engine's first mode, the profile's first model); a non-nil Version on
// PUT updates only that version (VERSION_CONFLICT otherwise).
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
