package api

import (
	"net/http"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
)

// listProfiles (addition) returns every RuntimeProfile.
func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request) {
	ps, err := s.svc.Profiles(r.Context())
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if s.cat != nil { // model keys are never shown
		rs, err := s.cat.ListRuntimeProfiles(r.Context())
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": rs})
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": ps})
}

// putProfile (addition) creates or replaces a stored RuntimeProfile.
func (s *Server) putProfile(w http.ResponseWriter, r *http.Request) {
	var p lifecycle.Profile
	if err := s.decode(w, r, &p); err != nil {
		httpx.WriteError(w, err)
		return
	}
	name := r.PathValue("name")
	if p.Name != "" && p.Name != name {
		httpx.WriteError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "profile name %q in the body differs from %q in the path", p.Name, name))
		return
	}
	p.Name = name
	if s.cat != nil { // seals a model key before it is stored
		out, err := s.cat.PutRuntimeProfile(r.Context(), p)
		if err != nil {
			httpx.WriteError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, out)
		return
	}
	out, err := s.svc.PutProfile(r.Context(), p)
	httpx.Answer(w, http.StatusOK, out, err)
}
