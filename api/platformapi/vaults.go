package platformapi

import (
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Credential vaults (/api/v1/vaults, see platform/vaults.go). Secret
// values are write-only: no answer carries one, and a body that carries
// them is decoded without echoing any of it in an error.

// decodeSecretBody decodes a body that may carry secret values: a JSON
// error says what is wrong with the body, not where, since the decoder's
// detail may quote part of a value.
func (h *Handler) decodeSecretBody(w http.ResponseWriter, r *http.Request, v any) error {
	err := h.decode(w, r, v)
	if sandbox.CodeOf(err) == sandbox.CodeInvalidRequest && strings.HasPrefix(sandbox.MessageOf(err), "invalid JSON body") {
		return sandbox.Errorf(platform.CodeInvalid, "invalid JSON body (the decoder's detail is withheld: the body may carry a secret value)")
	}
	return asPlatformInvalid(err)
}

func (h *Handler) listVaults(w http.ResponseWriter, r *http.Request) {
	cursor, limit, err := listPage(r)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	vs, next, err := h.cat.ListVaults(r.Context(), cursor, limit)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page(vs, next))
}

func (h *Handler) createVault(w http.ResponseWriter, r *http.Request) {
	var req wire.VaultRequest
	if err := h.decodeSecretBody(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	v, err := h.cat.CreateVault(r.Context(), req)
	httpx.Answer(w, http.StatusCreated, v, err)
}

func (h *Handler) getVault(w http.ResponseWriter, r *http.Request) {
	v, err := h.cat.GetVault(r.Context(), r.PathValue("id"))
	httpx.Answer(w, http.StatusOK, v, err)
}

func (h *Handler) updateVault(w http.ResponseWriter, r *http.Request) {
	var req wire.VaultRequest
	if err := h.decodeSecretBody(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	v, err := h.cat.UpdateVault(r.Context(), r.PathValue("id"), req)
	httpx.Answer(w, http.StatusOK, v, err)
}

func (h *Handler) deleteVault(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, h.cat.DeleteVault(r.Context(), r.PathValue("id")))
}

// putSecret creates (201) or replaces (200) one secret and answers the
// vault.
func (h *Handler) putSecret(w http.ResponseWriter, r *http.Request) {
	var req wire.SecretRequest
	if err := h.decodeSecretBody(w, r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	v, created, err := h.cat.PutSecret(r.Context(), r.PathValue("id"), r.PathValue("name"), req)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	httpx.WriteJSON(w, status, v)
}

func (h *Handler) deleteSecret(w http.ResponseWriter, r *http.Request) {
	httpx.NoContent(w, h.cat.DeleteSecret(r.Context(), r.PathValue("id"), r.PathValue("name")))
}
