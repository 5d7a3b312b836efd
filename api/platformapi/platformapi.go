// Package platformapi serves the agent platform's HTTP routes under
// /api/v1 (PLATFORM.md): engines, RuntimeProfiles and their model check,
// Agents, credential vaults, and Sessions with their conversations,
// inputs, interrupts, answers, messages and event streams (SSE).
//
// It neither authenticates nor authorizes: Routes hands the routes, as
// data, to the server (package api), which registers each behind its own
// authentication. Errors are answered by httpx.WriteError ({code,
// message}, the status of the sandbox error-code registry); a request
// body the sandbox layer would call INVALID_REQUEST_BODY is the
// platform's INVALID_REQUEST here. An interrupt or an answer to a Session
// whose runtime another live replica holds is forwarded to that replica
// (forward.go).
package platformapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sort"
	"strconv"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/api/idempotency"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Store is what the routes keep in or read from the server's store:
// idempotent answers (creating a conversation) and a Session's runtime
// lease, to find the replica holding it. store.Store satisfies it.
type Store interface {
	idempotency.Store
	// GetLease returns the stream's lease (a zero Lease when none).
	GetLease(ctx context.Context, stream string) (store.Lease, error)
}

// Backends lists the enabled sandbox backends by name, whose images
// GET /api/v1/engines checks (lifecycle.Service satisfies it).
type Backends interface {
	Backends() map[string]sandbox.Provider
}

// Config configures the routes. Catalog, Sessions, Backends and Store
// are required by the routes that use them.
type Config struct {
	Catalog  *platform.Catalog
	Sessions *platform.Sessions
	Backends Backends
	Store    Store
	// Holder is this replica's advertised URL, as other replicas forward
	// to it; a lease held under another live holder is forwarded there.
	Holder string
	// MaxBodyBytes bounds JSON request bodies (default 1 MiB).
	MaxBodyBytes int64
	Logger       *slog.Logger
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
	return &Handler{cfg: cfg, cat: cfg.Catalog, sess: cfg.Sessions, log: cfg.Logger}
}

// Route is one route: what the server registers, behind its
// authentication. What the server needs to know of a route beyond its
// pattern (the permission it requires, say) is a field of its own here,
// set in Routes.
type Route struct {
	// Pattern is an http.ServeMux pattern with its method, e.g.
	// "GET /api/v1/agents/{id}".
	Pattern string
	// Handler serves the route; it does not authenticate.
	Handler http.HandlerFunc
}

// Routes returns the /api/v1 routes, each pattern once.
func (h *Handler) Routes() []Route {
	return []Route{
		{"GET /api/v1/engines", h.listEngines},
		{"GET /api/v1/runtime-profiles", h.listRuntimeProfiles},
		{"GET /api/v1/runtime-profiles/{name}", h.getRuntimeProfile},
		{"PUT /api/v1/runtime-profiles/{name}", h.putRuntimeProfile},
		{"DELETE /api/v1/runtime-profiles/{name}", h.deleteRuntimeProfile},
		{"POST /api/v1/runtime-profiles/{name}/test-model", h.testModel},
		{"GET /api/v1/agents", h.listAgents},
		{"POST /api/v1/agents", h.createAgent},
		{"GET /api/v1/agents/{id}", h.getAgent},
		{"PUT /api/v1/agents/{id}", h.updateAgent},
		{"DELETE /api/v1/agents/{id}", h.deleteAgent},
		{"POST /api/v1/agents/{id}/conversations", h.createConversation},
		{"GET /api/v1/vaults", h.listVaults},
		{"POST /api/v1/vaults", h.createVault},
		{"GET /api/v1/vaults/{id}", h.getVault},
		{"PUT /api/v1/vaults/{id}", h.updateVault},
		{"DELETE /api/v1/vaults/{id}", h.deleteVault},
		{"PUT /api/v1/vaults/{id}/secrets/{name}", h.putSecret},
		{"DELETE /api/v1/vaults/{id}/secrets/{name}", h.deleteSecret},
		{"GET /api/v1/sessions", h.listSessions},
		{"GET /api/v1/sessions/{id}", h.getSession},
		{"DELETE /api/v1/sessions/{id}", h.deleteSession},
		{"POST /api/v1/sessions/{id}/turn-inputs", h.sendInput},
		{"POST /api/v1/sessions/{id}/interrupt", h.interruptSession},
		{"POST /api/v1/sessions/{id}/interaction-respond", h.respondInteraction},
		{"GET /api/v1/sessions/{id}/messages", h.sessionMessages},
		{"GET /api/v1/sessions/{id}/events", h.sessionEvents},
		{"GET /api/v1/sessions/{id}/ai-stream", h.aiStream},
	}
}

// decode reads one JSON object into v under the body limit (httpx.Decode).
func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	return httpx.Decode(w, r, v, h.cfg.MaxBodyBytes)
}

// idempotent runs do once per Idempotency-Key under scope, a replayed
// answer with replayStatus (idempotency.Serve).
func (h *Handler) idempotent(w http.ResponseWriter, r *http.Request, scope string, body []byte, replayStatus int, do func() (int, any, error)) {
	idempotency.Serve(w, r, h.cfg.Store, h.log, scope, body, replayStatus, do)
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
