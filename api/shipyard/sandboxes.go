package shipyard

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/identity"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Metadata the facade puts on the sandboxes it creates.
const (
	// metaAPI marks a sandbox made through this API, which lists only those.
	metaAPI = "astrabox.dev/api"
	// metaProfile is the Bay profile id the client asked for.
	metaProfile = "astrabox.dev/shipyard-profile"
	// metaPyContext is the id of the box's python code context.
	metaPyContext = "astrabox.dev/shipyard-python-context"
)

// DefaultProfile is the profile Bay's clients ask for by default. When no
// RuntimeProfile of that name exists it stands for the server's "default".
const DefaultProfile = "python-default"

// Bay's sandbox statuses: a client refuses any other word.
const (
	statusIdle     = "idle"
	statusStarting = "starting"
	statusReady    = "ready"
	statusFailed   = "failed"
	statusExpired  = "expired"
)

// capabilities are what every profile offers through this API. browser is
// never among them: no profile's image runs one yet.
func capabilities() []string { return []string{"python", "shell", "filesystem"} }

// sandboxView is Bay's SandboxResponse.
type sandboxView struct {
	ID            string     `json:"id"`
	Status        string     `json:"status"`
	Profile       string     `json:"profile"`
	CargoID       string     `json:"cargo_id"`
	Capabilities  []string   `json:"capabilities"`
	CreatedAt     time.Time  `json:"created_at"`
	ExpiresAt     *time.Time `json:"expires_at"`
	IdleExpiresAt *time.Time `json:"idle_expires_at"`
}

// status maps a record onto Bay's statuses. ready means a command would
// succeed now: the box runs and its execd answers (probe, when set, checks
// that; a list does not probe).
func (h *Handler) status(ctx context.Context, rec *store.Sandbox, probe bool) string {
	if expired(rec) {
		return statusExpired
	}
	switch rec.State {
	case sandbox.StatePending, sandbox.StateResuming:
		return statusStarting
	case sandbox.StatePaused, sandbox.StatePausing:
		return statusIdle
	case sandbox.StateFailed:
		return statusFailed
	case sandbox.StateRunning:
		b := h.box(rec.ID)
		b.mu.Lock()
		stopped := b.stopped
		b.mu.Unlock()
		if stopped {
			return statusIdle
		}
		if probe && !h.alive(ctx, rec) {
			return statusStarting
		}
		return statusReady
	}
	return statusExpired // Stopping for its TTL or idle timeout
}

func (h *Handler) view(ctx context.Context, rec *store.Sandbox, probe bool) sandboxView {
	v := sandboxView{ID: rec.ID, Status: h.status(ctx, rec, probe), Profile: rec.Metadata[metaProfile],
		CargoID: "cargo-" + rec.ID, Capabilities: capabilities(), CreatedAt: rec.CreatedAt, ExpiresAt: rec.ExpiresAt}
	if v.Profile == "" {
		v.Profile = rec.Profile
	}
	if rec.IdleTimeout > 0 {
		t := rec.LastActiveAt.Add(rec.IdleTimeout)
		v.IdleExpiresAt = &t
	}
	return v
}

// profileView is Bay's ProfileInfo.
type profileView struct {
	ID           string         `json:"id"`
	Image        string         `json:"image"`
	Resources    map[string]any `json:"resources"`
	Capabilities []string       `json:"capabilities"`
	IdleTimeout  int64          `json:"idle_timeout"`
	Description  string         `json:"description,omitempty"`
}

// listProfiles lists the RuntimeProfiles as Bay profiles, with
// python-default first: a RuntimeProfile of that name, or else the
// server's default profile under that id.
func (h *Handler) listProfiles(w http.ResponseWriter, r *http.Request) {
	ps, err := h.svc.Profiles(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var items, rest []profileView
	var def *lifecycle.Profile
	for i, p := range ps {
		switch p.Name {
		case DefaultProfile:
			items = append(items, toProfileView(p.Name, p))
		case "default":
			def = &ps[i]
			rest = append(rest, toProfileView(p.Name, p))
		default:
			rest = append(rest, toProfileView(p.Name, p))
		}
	}
	if len(items) == 0 && def != nil {
		pv := toProfileView(DefaultProfile, *def)
		pv.Description = "the server's default RuntimeProfile"
		items = append(items, pv)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": append(items, rest...)})
}

func toProfileView(id string, p lifecycle.Profile) profileView {
	res := map[string]any{}
	if p.Resources.MilliCPU > 0 {
		res["cpus"] = float64(p.Resources.MilliCPU) / 1000
	}
	if p.Resources.MemoryBytes > 0 {
		res["memory"] = strconv.FormatInt(p.Resources.MemoryBytes>>20, 10) + "Mi"
	}
	if p.Resources.DiskBytes > 0 {
		res["disk"] = strconv.FormatInt(p.Resources.DiskBytes>>20, 10) + "Mi"
	}
	img := p.Image
	if img == "" {
		img = "host"
	}
	return profileView{ID: id, Image: img, Resources: res, Capabilities: capabilities(), IdleTimeout: int64(p.IdleTimeout / time.Second)}
}

// lifecycleProfile is the RuntimeProfile a Bay profile id names.
func (h *Handler) lifecycleProfile(ctx context.Context, id string) (string, error) {
	_, err := h.svc.LookupProfile(ctx, id)
	switch {
	case err == nil:
		return id, nil
	case !errors.Is(err, lifecycle.ErrProfileNotFound):
		return "", err
	case id == DefaultProfile:
		return "default", nil
	}
	names, _ := h.svc.ProfileNames(ctx)
	e := validation("profile " + quote(id) + " does not exist")
	e.Details = map[string]any{"profile": id, "available": names}
	return "", e
}

type createRequest struct {
	Profile string  `json:"profile"`
	CargoID *string `json:"cargo_id"`
	TTL     *int64  `json:"ttl"`
}

// createSandbox starts a sandbox of the profile. It answers 201 as soon as
// the box is ready or CreateWait has passed, whichever is first; the box
// keeps starting in the background and the client polls its status.
func (h *Handler) createSandbox(w http.ResponseWriter, r *http.Request) {
	var req createRequest
	body, err := readJSON(w, r, h.cfg.MaxBodyBytes, &req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// A key is the caller's own: another user's same key and body creates
	// its own sandbox rather than replaying the first caller's.
	h.idempotent(w, r, "create:"+callerID(r), body, func() (int, any, error) {
		rec, err := h.create(r.Context(), req)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusCreated, h.view(r.Context(), rec, true), nil
	})
}

type created struct {
	rec *store.Sandbox
	err error
}

func (h *Handler) create(ctx context.Context, req createRequest) (*store.Sandbox, error) {
	if req.Profile == "" {
		req.Profile = DefaultProfile
	}
	if req.CargoID != nil && *req.CargoID != "" {
		return nil, validation("cargo_id: attaching an existing cargo is not supported; omit it for a fresh workspace")
	}
	prof, err := h.lifecycleProfile(ctx, req.Profile)
	if err != nil {
		return nil, err
	}
	var ttl time.Duration // Bay: null or 0 is no expiry
	if req.TTL != nil {
		max := int64(h.svc.Limits().Timeout() / time.Second)
		if *req.TTL < 0 || *req.TTL > max {
			return nil, validation("ttl must be 0 (no expiry) to " + strconv.FormatInt(max, 10) + " seconds")
		}
		ttl = time.Duration(*req.TTL) * time.Second
	}
	recorded := make(chan store.Sandbox, 1)
	done := make(chan created, 1)
	creq := lifecycle.CreateRequest{Profile: prof, Timeout: &ttl,
		Metadata: map[string]string{metaAPI: "shipyard", metaProfile: req.Profile},
		Recorded: func(rec store.Sandbox) { recorded <- rec }, Owner: ownerOf(ctx)}
	go func() {
		// The box keeps starting when the client stops waiting; the
		// service bounds the backend's create.
		cctx, cancel := bg(ctx, 10*time.Minute)
		defer cancel()
		rec, err := h.svc.Create(cctx, creq)
		done <- created{rec, err}
	}()
	wait := time.NewTimer(h.cfg.CreateWait)
	defer wait.Stop()
	var pending *store.Sandbox
	for {
		select {
		case rec := <-recorded:
			pending = &rec
		case res := <-done:
			if res.err != nil {
				if res.rec != nil && res.rec.ID != "" {
					// The failed record is of no use to the client.
					go h.discard(res.rec.ID)
				}
				return nil, res.err
			}
			return res.rec, nil
		case <-wait.C:
			if pending != nil {
				return pending, nil
			}
			wait.Reset(time.Second) // not even recorded yet: keep waiting
		}
	}
}

// discard deletes a sandbox whose create failed.
func (h *Handler) discard(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := h.svc.Delete(ctx, id, "create_failed"); err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		h.log.Warn("delete failed sandbox", "sandbox_id", id, "err", err)
	}
}

func (h *Handler) getSandbox(w http.ResponseWriter, r *http.Request) {
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, h.view(r.Context(), rec, true))
}

// listSandboxes lists the sandboxes made through this API, oldest first;
// the cursor is the next page's number.
func (h *Handler) listSandboxes(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), 50, 1, 200, "limit")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	page, err := intParam(q.Get("cursor"), 1, 1, 1<<20, "cursor")
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	want := q.Get("status")
	f := store.ListFilter{Metadata: map[string]string{metaAPI: "shipyard"}, Page: page, PageSize: limit}
	if p := identity.PrincipalFrom(r.Context()); !p.IsAdmin() {
		f.OwnerID = p.UserID
	}
	recs, total, err := h.svc.List(r.Context(), f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	items := []sandboxView{}
	for _, rec := range recs {
		if rec.State == sandbox.StateTerminated || (rec.State == sandbox.StateStopping && !expiredReason(rec.Reason)) {
			continue
		}
		if v := h.view(r.Context(), rec, false); want == "" || v.Status == want {
			items = append(items, v)
		}
	}
	var next *string
	if page*limit < total {
		s := strconv.Itoa(page + 1)
		next = &s
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": items, "next_cursor": next})
}

func intParam(s string, def, lo, hi int, name string) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, validation(name + " must be an integer from " + strconv.Itoa(lo) + " to " + strconv.Itoa(hi))
	}
	return n, nil
}

func (h *Handler) deleteSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := h.get(r.Context(), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	err := h.svc.Delete(r.Context(), id, "user_delete")
	if err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		h.writeError(w, r, err)
		return
	}
	h.forget(id)
	if err == nil && h.cfg.Audit != nil {
		h.cfg.Audit(r, "sandbox.delete", "sandbox:"+id)
	}
	w.WriteHeader(http.StatusNoContent)
}

// extendTTL adds extend_by seconds to the current expiry.
func (h *Handler) extendTTL(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	var req struct {
		ExtendBy *int64 `json:"extend_by"`
	}
	body, err := readJSON(w, r, h.cfg.MaxBodyBytes, &req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	// The caller must see the box before any answer, a replayed one too.
	if _, err := h.get(r.Context(), id); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.idempotent(w, r, "extend_ttl:"+callerID(r)+":"+id, body, func() (int, any, error) {
		if req.ExtendBy == nil || *req.ExtendBy < 1 {
			return 0, nil, validation("extend_by must be a whole number of seconds, at least 1")
		}
		rec, err := h.get(r.Context(), id)
		if err != nil {
			return 0, nil, err
		}
		if expired(rec) || rec.State == sandbox.StateStopping {
			return 0, nil, newError(http.StatusConflict, codeExpired, "sandbox "+id+" has expired; it cannot be extended")
		}
		if rec.ExpiresAt == nil {
			return 0, nil, newError(http.StatusConflict, codeTTLInfinite, "sandbox "+id+" never expires; there is nothing to extend")
		}
		if max := int64(h.svc.Limits().Timeout() / time.Second); *req.ExtendBy > max {
			return 0, nil, validation("extend_by exceeds the server's maximum of " + strconv.FormatInt(max, 10) + " seconds")
		}
		rec, err = h.svc.Renew(r.Context(), id, rec.ExpiresAt.Add(time.Duration(*req.ExtendBy)*time.Second))
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, h.view(r.Context(), rec, false), nil
	})
}

// keepalive resets the idle timer; it starts nothing.
func (h *Handler) keepalive(w http.ResponseWriter, r *http.Request) {
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	h.svc.Touch(r.Context(), rec)
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// stopSandbox reclaims the box's compute and keeps its files: a backend
// that can pause freezes the box; otherwise the python context ends (its
// variables are lost, as with Bay) and the box shows idle. The next exec
// starts it again. Stopping twice is fine.
func (h *Handler) stopSandbox(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rec, err := h.get(r.Context(), id)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if rec.State == sandbox.StateRunning {
		if p := h.svc.Backends()[rec.Backend]; p != nil && p.Capabilities().Pause {
			if _, err := h.svc.Pause(r.Context(), id); err != nil && sandbox.CodeOf(err) != sandbox.CodeConflict {
				h.writeError(w, r, err)
				return
			}
		} else {
			h.resetPython(r.Context(), rec)
			b := h.box(id)
			b.mu.Lock()
			b.stopped = true
			b.mu.Unlock()
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "stopped"})
}

// callerID is the user id of r's caller ("" for none), which scopes its
// Idempotency-Keys: one user's key never replays another's answer.
func callerID(r *http.Request) string {
	if p := identity.PrincipalFrom(r.Context()); p != nil {
		return p.UserID
	}
	return ""
}

// ownerOf returns who a sandbox the caller of ctx makes belongs to.
func ownerOf(ctx context.Context) lifecycle.Owner {
	p := identity.PrincipalFrom(ctx)
	return lifecycle.Owner{UserID: p.UserID, OrgID: p.OrgID}
}
