package api

import (
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// Credential vaults (/api/v1/vaults, see platform/vaults.go). Secret
// values are write-only: no answer carries one, and a body that carries
// them is decoded without echoing any of it in an error.

// decodeSecretBody decodes a body that may carry secret values: a JSON
// error says what is wrong with the body, not where, since the decoder's
// detail may quote part of a value.
func (s *Server) decodeSecretBody(w http.ResponseWriter, r *http.Request, v any) error {
	err := s.decode(w, r, v)
	if sandbox.CodeOf(err) == sandbox.CodeInvalidRequest && strings.HasPrefix(sandbox.MessageOf(err), "invalid JSON body") {
		return sandbox.Errorf(platform.CodeInvalid, "invalid JSON body (the decoder's detail is withheld: the body may carry a secret value)")
	}
	return asPlatformInvalid(err)
}

func (s *Server) listVaults(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		writeError(w, err)
		return
	}
	vs, next, err := s.cat.ListVaults(r.Context(), cursor, limit)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, page(vs, next))
}

func (s *Server) createVault(w http.ResponseWriter, r *http.Request) {
	var req platform.VaultRequest
	if err := s.decodeSecretBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.cat.CreateVault(r.Context(), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, v)
}

func (s *Server) getVault(w http.ResponseWriter, r *http.Request) {
	v, err := s.cat.GetVault(r.Context(), r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) updateVault(w http.ResponseWriter, r *http.Request) {
	var req platform.VaultRequest
	if err := s.decodeSecretBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	v, err := s.cat.UpdateVault(r.Context(), r.PathValue("id"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) deleteVault(w http.ResponseWriter, r *http.Request) {
	if err := s.cat.DeleteVault(r.Context(), r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// putSecret creates (201) or replaces (200) one secret and answers the
// vault.
func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	var req platform.SecretRequest
	if err := s.decodeSecretBody(w, r, &req); err != nil {
		writeError(w, err)
		return
	}
	v, created, err := s.cat.PutSecret(r.Context(), r.PathValue("id"), r.PathValue("name"), req)
	if err != nil {
		writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, v)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	if err := s.cat.DeleteSecret(r.Context(), r.PathValue("id"), r.PathValue("name")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
