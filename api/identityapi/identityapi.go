// Package identityapi serves identity's HTTP routes under /api/v1: the
// caller (user/current), the caller's API keys (user/api-keys), and for
// administrators the users, their keys and the audit log (admin/...).
//
// Like api/platformapi it neither authenticates nor checks scopes: Routes
// hands the routes, each with the scope it needs, to the server (package
// api), which authenticates every request, refuses one without the scope
// and puts the caller in the request's context (identity.PrincipalFrom).
package identityapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/identity/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Config configures the routes.
type Config struct {
	Accounts *identity.Accounts
	// Auth starts, reads and ends browser sessions.
	Auth *identity.Authenticator
	// Web configures browser sign-in (nil: keys only).
	Web *Web
	// MaxBodyBytes bounds JSON bodies (default 1 MiB).
	MaxBodyBytes int64
}

// Handler serves the routes.
type Handler struct {
	cfg     Config
	acc     *identity.Accounts
	maxBody int64
}

// New returns the routes' handler.
func New(cfg Config) *Handler {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	return &Handler{cfg: cfg, acc: cfg.Accounts, maxBody: cfg.MaxBodyBytes}
}

// Routes returns the routes with the scope each needs.
func (h *Handler) Routes() []httpx.Route {
	return []httpx.Route{
		{Pattern: "GET /api/v1/user/current", Need: string(identity.ScopeRead), Handler: h.current},
		{Pattern: "GET /api/v1/user/api-keys", Need: string(identity.ScopeRead), Handler: h.listOwnKeys},
		{Pattern: "POST /api/v1/user/api-keys", Need: string(identity.ScopeWrite), Handler: h.createOwnKey},
		{Pattern: "DELETE /api/v1/user/api-keys/{kid}", Need: string(identity.ScopeWrite), Handler: h.revokeOwnKey},
		{Pattern: "GET /api/v1/admin/users", Need: string(identity.ScopeAdmin), Handler: h.listUsers},
		{Pattern: "POST /api/v1/admin/users", Need: string(identity.ScopeAdmin), Handler: h.createUser},
		{Pattern: "GET /api/v1/admin/users/{id}", Need: string(identity.ScopeAdmin), Handler: h.getUser},
		{Pattern: "PATCH /api/v1/admin/users/{id}", Need: string(identity.ScopeAdmin), Handler: h.updateUser},
		{Pattern: "GET /api/v1/admin/users/{id}/api-keys", Need: string(identity.ScopeAdmin), Handler: h.listUserKeys},
		{Pattern: "POST /api/v1/admin/users/{id}/api-keys", Need: string(identity.ScopeAdmin), Handler: h.createUserKey},
		{Pattern: "DELETE /api/v1/admin/users/{id}/api-keys/{kid}", Need: string(identity.ScopeAdmin), Handler: h.revokeUserKey},
		{Pattern: "GET /api/v1/admin/audit", Need: string(identity.ScopeAdmin), Handler: h.listAudit},
	}
}

func caller(r *http.Request) *identity.Principal { return identity.PrincipalFrom(r.Context()) }

func (h *Handler) current(w http.ResponseWriter, r *http.Request) {
	cu, err := h.acc.Current(r.Context(), caller(r))
	httpx.Answer(w, http.StatusOK, cu, err)
}

func (h *Handler) listOwnKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := h.acc.ListKeys(r.Context(), caller(r).UserID)
	httpx.Answer(w, http.StatusOK, wire.Page[wire.APIKey]{Items: ks}, err)
}

func (h *Handler) createOwnKey(w http.ResponseWriter, r *http.Request) {
	h.createKey(w, r, caller(r).UserID)
}

func (h *Handler) revokeOwnKey(w http.ResponseWriter, r *http.Request) {
	k, err := h.acc.RevokeKey(r.Context(), caller(r), caller(r).UserID, r.PathValue("kid"))
	httpx.Answer(w, http.StatusOK, k, err)
}

func (h *Handler) listUsers(w http.ResponseWriter, r *http.Request) {
	limit, err := pageLimit(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	us, next, err := h.acc.ListUsers(r.Context(), r.URL.Query().Get("cursor"), limit)
	httpx.Answer(w, http.StatusOK, wire.Page[wire.User]{Items: us, NextCursor: nullable(next)}, err)
}

func (h *Handler) createUser(w http.ResponseWriter, r *http.Request) {
	var req wire.UserRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	u, err := h.acc.CreateUser(r.Context(), caller(r), req)
	httpx.Answer(w, http.StatusCreated, u, err)
}

func (h *Handler) getUser(w http.ResponseWriter, r *http.Request) {
	u, err := h.acc.GetUser(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, u, err)
}

func (h *Handler) updateUser(w http.ResponseWriter, r *http.Request) {
	var req wire.UserRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	u, err := h.acc.UpdateUser(r.Context(), caller(r), r.PathValue("id"), req)
	httpx.Answer(w, http.StatusOK, u, err)
}

func (h *Handler) listUserKeys(w http.ResponseWriter, r *http.Request) {
	if _, err := h.acc.GetUser(r.Context(), r.PathValue("id")); err != nil {
		httpx.WriteError(w, err)
		return
	}
	ks, err := h.acc.ListKeys(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, wire.Page[wire.APIKey]{Items: ks}, err)
}

func (h *Handler) createUserKey(w http.ResponseWriter, r *http.Request) {
	h.createKey(w, r, r.PathValue("id"))
}

func (h *Handler) revokeUserKey(w http.ResponseWriter, r *http.Request) {
	k, err := h.acc.RevokeKey(r.Context(), caller(r), r.PathValue("id"), r.PathValue("kid"))
	httpx.Answer(w, http.StatusOK, k, err)
}

func (h *Handler) createKey(w http.ResponseWriter, r *http.Request, userID string) {
	var req wire.APIKeyRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	k, err := h.acc.CreateKey(r.Context(), caller(r), userID, req)
	if err == nil {
		w.Header().Set("Cache-Control", "no-store") // the key is in the body, once
	}
	httpx.Answer(w, http.StatusCreated, k, err)
}

func (h *Handler) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := pageLimit(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	f := store.AuditFilter{ActorID: q.Get("actor_id"), Action: q.Get("action"), Target: q.Get("target"), Limit: limit}
	if c := q.Get("cursor"); c != "" {
		if f.BeforeSeq, err = strconv.ParseInt(c, 10, 64); err != nil || f.BeforeSeq < 1 {
			httpx.WriteError(w, sandbox.Errorf(identity.CodeInvalid, "cursor is not one this server handed out"))
			return
		}
	}
	if s := q.Get("since"); s != "" {
		if f.Since, err = time.Parse(time.RFC3339, s); err != nil {
			httpx.WriteError(w, sandbox.Errorf(identity.CodeInvalid, "since must be an RFC 3339 time"))
			return
		}
	}
	es, next, err := h.acc.ListAudit(r.Context(), f)
	httpx.Answer(w, http.StatusOK, wire.Page[wire.AuditEntry]{Items: es, NextCursor: nullable(next)}, err)
}

// pageLimit reads limit (1 to 200; 0 when absent).
func pageLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 200 {
		return 0, sandbox.Errorf(identity.CodeInvalid, "limit must be 1 to 200")
	}
	return n, nil
}

func (h *Handler) decode(w http.ResponseWriter, r *http.Request, v any) error {
	if err := httpx.Decode(w, r, v, h.maxBody); err != nil {
		if sandbox.CodeOf(err) == sandbox.CodeInvalidRequest {
			return sandbox.Errorf(identity.CodeInvalid, "%s", sandbox.MessageOf(err))
		}
		return err
	}
	return nil
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
