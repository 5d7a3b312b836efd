package platformapi

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/modelapi"
	"github.com/astrabox/astrabox/sandbox"
)

// modelCheckRequest is the optional body of POST
// /api/v1/runtime-profiles/{name}/test-model.
type modelCheckRequest struct {
	// Model is the model name to ask (default: the profile's first).
	Model string `json:"model"`
}

// testModel (addition) checks a RuntimeProfile's model endpoint as the
// agent program would reach it: one streamed Chat Completions request
// with the profile's real key, read up to its first chunk and then
// closed. A failed check is still 200 with ok false; only an unknown
// profile, one without an endpoint, or no model to ask is an error.
func (h *Handler) testModel(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	if err != nil {
		httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "read request body: %v", err))
		return
	}
	var req modelCheckRequest
	if len(bytes.TrimSpace(body)) > 0 {
		if err := httpx.DecodeBytes(body, &req); err != nil {
			httpx.WriteError(w, asPlatformInvalid(err))
			return
		}
	}
	p, err := h.cat.RuntimeProfile(r.Context(), r.PathValue("name"))
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	if p.Model == nil || p.Model.BaseURL == "" {
		httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "runtime profile %q has no model endpoint", p.Name))
		return
	}
	model := req.Model
	if model == "" && len(p.Model.Models) > 0 {
		model = p.Model.Models[0]
	}
	if model == "" {
		httpx.WriteError(w, sandbox.Errorf(platform.CodeInvalid, "runtime profile %q lists no models; name one in the body ({\"model\": ...})", p.Name))
		return
	}
	key, err := h.cat.ModelKey(p)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), modelapi.CheckTimeout)
	defer cancel()
	res := modelapi.Check(ctx, http.DefaultClient, strings.TrimRight(p.Model.BaseURL, "/"), key, model)
	h.log.Info("model endpoint checked", "profile", p.Name, "model", model, "ok", res.OK, "status", res.Status, "ms", res.LatencyMS)
	httpx.WriteJSON(w, http.StatusOK, res)
}
