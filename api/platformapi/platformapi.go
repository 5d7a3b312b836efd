// Package platformapi serves the agent platform's HTTP routes under
// /api/v1 (PLATFORM.md): engines, RuntimeProfiles and their model check,
// Agents, credential vaults, and Sessions with their conversations,
// inputs, interrupts, answers, messages and event streams (SSE).
//
// It neither authenticates nor authorizes: Routes hands the routes, as
// data, to the server (package api), which registers each behind its own
// authentication and the scope the route needs, and puts the caller in
// the request's context; package platform decides, from that caller, what
// it may see and change (see its documentation). An event stream re-checks
// its caller about every second while it lasts (Config.Reauthorize) and
// ends once the caller may no longer read the Session. Errors are answered by httpx.WriteError ({code,
// message}, the status of the sandbox error-code registry); a request
// body the sandbox layer would call INVALID_REQUEST_BODY is the
// platform's INVALID_REQUEST here. An interrupt or an answer to a Session
// whose runtime another live replica holds is forwarded to that replica
// (forward.go).
package platformapi

import (
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/idempotency"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// Backends lists the enabled sandbox backends by name, whose images
// GET /api/v1/engines checks (lifecycle.Service satisfies it).
type Backends interface {
	Backends() map[string]sandbox.Provider
}

// Config configures the routes. Catalog, Sessions, Backends and
// Idempotency are required by the routes that use them.
type Config struct {
	Catalog  *platform.Catalog
	Sessions *platform.Sessions
	Backends Backends
	// Idempotency runs the requests safe to retry with an Idempotency-Key
	// (creating a conversation).
	Idempotency *idempotency.Keeper
	// MaxBodyBytes bounds JSON request bodies (default 1 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
	// Reauthorize authenticates a request again, as the server did before
	// calling the handler, and returns its caller now. An open event
	// stream (ai-stream, events) calls it every ReauthorizeEvery and ends
	// once it fails (a revoked or expired key, a disabled user), the
	// caller lacks the read scope, or the caller may no longer see the
	// Session. Nil: streams are checked when they open only.
	Reauthorize func(r *http.Request) (*identity.Principal, error)
	// ReauthorizeEvery is how often a stream calls Reauthorize (default
	// a second).
	ReauthorizeEvery time.Duration
}

// Handler serves the routes (Routes); its methods are safe for
// concurrent use.
type Handler struct {
	cfg  Config
	cat  *platform.Catalog
	sess *platform.Sessions
	log  *slog.Logger
}

// New returns the routes' handler.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReauthorizeEvery <= 0 {
		cfg.ReauthorizeEvery = time.Second
	}
	return &Handler{cfg: cfg, cat: cfg.Catalog, sess: cfg.Sessions, log: cfg.Logger}
}

// The scopes the routes need (identity.Scope's names; httpx.Route.Need).
const (
	read  = "read"
	write = "write"
	admin = "admin"
)

// Routes returns the /api/v1 routes, each pattern once, with the scope
// each needs: reading needs read, changing write, and RuntimeProfiles'
// changes, their model check and every vault route admin. What a caller
// may do beyond its scopes (whose Agents and Sessions) package platform
// decides.
func (h *Handler) Routes() []httpx.Route {
	return []httpx.Route{
		{Pattern: "GET /api/v1/engines", Need: read, Handler: h.listEngines},
		{Pattern: "GET /api/v1/runtime-profiles", Need: read, Handler: h.listRuntimeProfiles},
		{Pattern: "GET /api/v1/runtime-profiles/{name}", Need: read, Handler: h.getRuntimeProfile},
		{Pattern: "PUT /api/v1/runtime-profiles/{name}", Need: admin, Audit: "runtime_profile.put", Handler: h.putRuntimeProfile},
		{Pattern: "DELETE /api/v1/runtime-profiles/{name}", Need: admin, Audit: "runtime_profile.delete", Handler: h.deleteRuntimeProfile},
		{Pattern: "POST /api/v1/runtime-profiles/{name}/test-model", Need: admin, Handler: h.testModel},
		{Pattern: "GET /api/v1/agents", Need: read, Handler: h.listAgents},
		{Pattern: "POST /api/v1/agents", Need: write, Handler: h.createAgent},
		{Pattern: "GET /api/v1/agents/{id}", Need: read, Handler: h.getAgent},
		{Pattern: "PUT /api/v1/agents/{id}", Need: write, Handler: h.updateAgent},
		{Pattern: "DELETE /api/v1/agents/{id}", Need: write, Audit: "agent.delete", Handler: h.deleteAgent},
		{Pattern: "GET /api/v1/agents/{id}/access", Need: read, Handler: h.getAgentAccess},
		{Pattern: "PUT /api/v1/agents/{id}/access", Need: write, Audit: "agent.access", Handler: h.putAgentAccess},
		{Pattern: "POST /api/v1/agents/{id}/conversations", Need: write, Handler: h.createConversation},
		{Pattern: "GET /api/v1/vaults", Need: admin, Handler: h.listVaults},
		{Pattern: "POST /api/v1/vaults", Need: admin, Audit: "vault.create", Handler: h.createVault},
		{Pattern: "GET /api/v1/vaults/{id}", Need: admin, Handler: h.getVault},
		{Pattern: "PUT /api/v1/vaults/{id}", Need: admin, Audit: "vault.update", Handler: h.updateVault},
		{Pattern: "DELETE /api/v1/vaults/{id}", Need: admin, Audit: "vault.delete", Handler: h.deleteVault},
		{Pattern: "PUT /api/v1/vaults/{id}/secrets/{name}", Need: admin, Audit: "vault.secret_put", Handler: h.putSecret},
		{Pattern: "DELETE /api/v1/vaults/{id}/secrets/{name}", Need: admin, Audit: "vault.secret_delete", Handler: h.deleteSecret},
		{Pattern: "GET /api/v1/sessions", Need: read, Handler: h.listSessions},
		{Pattern: "GET /api/v1/sessions/{id}", Need: read, Handler: h.getSession},
		{Pattern: "DELETE /api/v1/sessions/{id}", Need: write, Audit: "session.delete", Handler: h.deleteSession},
		{Pattern: "POST /api/v1/sessions/{id}/turn-inputs", Need: write, Handler: h.sendInput},
		{Pattern: "POST /api/v1/sessions/{id}/interrupt", Need: write, Handler: h.interruptSession},
		{Pattern: "POST /api/v1/sessions/{id}/interaction-respond", Need: write, Handler: h.respondInteraction},
		{Pattern: "GET /api/v1/sessions/{id}/messages", Need: read, Handler: h.sessionMessages},
		{Pattern: "GET /api/v1/sessions/{id}/events", Need: read, Handler: h.sessionEvents},
		{Pattern: "GET /api/v1/sessions/{id}/ai-stream", Need: read, Handler: h.aiStream},
	}
}

// decode reads one JSON object into v under the body limit (httpx.Decode).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return httpx.Decode(w, r, v, h.cfg.MaxBodyBytes)
}

// idempotent runs do once per Idempotency-Key under scope, a replayed
// answer with replayStatus (idempotency.Serve).
func (h *Handler) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, replayStatus int, do func() (int, any, error)) {
	h.cfg.Idempotency.Serve(w, r, scope, body, replayStatus, do)
}

// asPlatformInvalid answers the sandbox layer's invalid-body code with the
// platform's INVALID_REQUEST on /api/v1 routes.
func asPlatformInvalid(err error) error {
	var e *sandbox.Error
	if errors.As(err, &e) && e.Code == sandbox.CodeInvalidRequest {
		return &sandbox.Error{Code: platform.CodeInvalid, Message: e.Message}
	}
	return err
}

// listPage reads limit and cursor.
func listPage(r *http.Request) (string, int, error) {
	limit := 0
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 200 {
			return "", 0, sandbox.Errorf(platform.CodeInvalid, "limit must be 1 to 200")
		}
		limit = n
	}
	return r.URL.Query().Get("cursor"), limit, nil
}

// page is a list's answer: {items, next_cursor} (null when there is no
// next page; items [] rather than null).
func page[T any](items []T, next string) map[string]any {
	var nc any
	if next != "" {
		nc = next
	}
	if items == nil {
		items = []T{}
	}
	return map[string]any{"items": items, "next_cursor": nc}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
