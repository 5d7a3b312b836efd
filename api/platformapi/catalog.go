package platformapi

import (
	"net/http"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// The catalog's routes: engines, RuntimeProfiles and Agents.

// listEngines lists the engine kinds that can run here: each with, per
// backend, whether the image its program needs is there; a kind whose
// image no backend has is left out.
func (h *Handler) listEngines(w http.ResponseWriter, r *http.Request) {
	items := []wire.Engine{}
	for _, kind := range sortedKeys(h.cat.Engines()) {
		d := h.cat.Engines()[kind].Descriptor()
		info := wire.Engine{EngineDescriptor: d, Images: map[string]bool{}}
		anywhere := false
		for name, p := range h.cfg.Backends.Backends() {
			has := d.Image == ""
			if c, ok := p.(sandbox.ImageChecker); ok && !has {
				var err error
				if has, err = c.HasImage(r.Context(), d.Image); err != nil {
					h.log.Warn("check an engine's image", "engine_kind", kind, "backend", name, "err", err)
				}
			}
			info.Images[name] = has
			anywhere = anywhere || has
		}
		if anywhere {
			items = append(items, info)
		}
	}
	httpx.WriteJSON(w, http.StatusOK, page(items, ""))
}

func (h *Handler) listRuntimeProfiles(w http.ResponseWriter, r *http.Request) {
	ps, err := h.cat.ListRuntimeProfiles(r.Context())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(ps, ""))
}

func (h *Handler) getRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	p, err := h.cat.RuntimeProfile(r.Context(), r.PathValue("name"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, platform.Redact(p))
}

func (h *Handler) putRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	var p lifecycle.Profile
	if err := h.decode(w, r, &p); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	name := r.PathValue("name")
	if p.Name != "" && p.Name != name {
		httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "profile name %q in the body differs from %q in the path", p.Name, name))
		return
	}
	p.Name = name
	out, err := h.cat.PutRuntimeProfile(r.Context(), p)
	if err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

func (h *Handler) deleteRuntimeProfile(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, h.cat.DeleteRuntimeProfile(r.Context(), r.PathValue("name")))
}

func (h *Handler) listAgents(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	as, next, err := h.cat.ListAgents(r.Context(), cursor, limit)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(as, next))
}

func (h *Handler) createAgent(w http.ResponseWriter, r *http.Request) {
	var req wire.AgentRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	a, err := h.cat.CreateAgent(r.Context(), req)
	httpx.Answer(w, http.StatusCreated, a, err)
}

func (h *Handler) getAgent(w http.ResponseWriter, r *http.Request) {
	a, err := h.cat.GetAgent(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, a, err)
}

func (h *Handler) updateAgent(w http.ResponseWriter, r *http.Request) {
	var req wire.AgentRequest
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	a, err := h.cat.UpdateAgent(r.Context(), r.PathValue("id"), req)
	httpx.Answer(w, http.StatusOK, a, err)
}

func (h *Handler) deleteAgent(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, h.cat.DeleteAgent(r.Context(), r.PathValue("id")))
}

// getAgentAccess answers who may see, use and manage an Agent the caller
// may see.
func (h *Handler) getAgentAccess(w http.ResponseWriter, r *http.Request) {
	acc, err := h.cat.AgentAccess(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, acc, err)
}

// putAgentAccess replaces an Agent's visibility, allowed users and admins.
func (h *Handler) putAgentAccess(w http.ResponseWriter, r *http.Request) {
	var req wire.AgentAccess
	if err := h.decode(w, r, &req); err != nil {
		httpx.WriteError(w, asPlatformInvalid(err))
		return
	}
	acc, err := h.cat.SetAgentAccess(r.Context(), r.PathValue("id"), req)
	httpx.Answer(w, http.StatusOK, acc, err)
}
