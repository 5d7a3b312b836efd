package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/egress/credproxy"
	"github.com/astrabox/astrabox/sandbox"
)

// The Credential Vault routes of OpenSandbox's egress API
// (egress-api.yaml): POST, GET, PATCH and DELETE /credential-vault, GET
// /credential-vault/credentials[/{name}] and GET
// /credential-vault/bindings[/{name}], served on port 18080 of a sandbox's
// endpoint like /policy (with the API key or the endpoint's headers,
// which code in the box does not have; inside the box the gateway's port
// 18080 refuses them all). Values are write-only: no answer, log line or
// error message carries one. Bodies are decoded strictly (the schemas
// allow no other properties), and their decoding errors never quote the
// body. Errors are plain text, as the specification has them, starting
// with the error's code ("CREDENTIAL_PROXY_NOT_ENABLED: ...") so that
// clients can tell them apart.

// serveCredentialVault serves sub ("" for /credential-vault, else what
// follows "/credential-vault/") for sandbox id.
func (s *Server) serveCredentialVault(w http.ResponseWriter, r *http.Request, id, sub string) {
	ctx := r.Context()
	// The vault is applied by the egress proxy of the replica that serves
	// the box's backend instance: requests go there.
	rec, err := s.svc.Get(ctx, id)
	if err != nil {
		vaultError(w, err)
		return
	}
	if s.forwardElsewhere(w, r, rec) {
		return
	}
	only := func(allow string) bool {
		if !slices.Contains(strings.Split(allow, ", "), r.Method) {
			w.Header().Set("Allow", allow)
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return false
		}
		return true
	}
	kind, name, named := strings.Cut(sub, "/")
	switch {
	case sub == "":
		if !only("GET, POST, PATCH, DELETE") {
			return
		}
		s.vaultRoot(w, r, id)
	case (kind == "credentials" || kind == "bindings") && (!named || name != ""):
		if !only("GET") {
			return
		}
		v, err := s.svc.CredentialVault(ctx, id)
		if err != nil {
			vaultError(w, err)
			return
		}
		switch {
		case kind == "credentials" && !named:
			httpx.WriteJSON(w, http.StatusOK, v.CredentialList())
		case kind == "bindings" && !named:
			httpx.WriteJSON(w, http.StatusOK, v.BindingList())
		case kind == "credentials":
			m, err := v.CredentialMetadata(name)
			answer(w, m, err)
		default:
			m, err := v.BindingMetadata(name)
			answer(w, m, err)
		}
	default:
		http.Error(w, "the Credential Vault serves /credential-vault, /credential-vault/credentials[/{name}] and /credential-vault/bindings[/{name}]", http.StatusNotFound)
	}
}

// vaultRoot serves the methods of /credential-vault.
func (s *Server) vaultRoot(w http.ResponseWriter, r *http.Request, id string) {
	ctx := r.Context()
	switch r.Method {
	case http.MethodGet:
		v, err := s.svc.CredentialVault(ctx, id)
		if err != nil {
			vaultError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v.State())
	case http.MethodPost:
		var req credproxy.CreateRequest
		if !s.decodeVaultBody(w, r, &req) {
			return
		}
		v, err := s.svc.CreateCredentialVault(ctx, id, req)
		if err != nil {
			vaultError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusCreated, v.State())
	case http.MethodPatch:
		var m credproxy.Mutation
		if !s.decodeVaultBody(w, r, &m) {
			return
		}
		v, err := s.svc.PatchCredentialVault(ctx, id, m)
		if err != nil {
			vaultError(w, err)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, v.State())
	case http.MethodDelete:
		if err := s.svc.DeleteCredentialVault(ctx, id); err != nil {
			vaultError(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}
}

// answer writes v, or err as vaultError does.
func answer[T any](w http.ResponseWriter, v T, err error) {
	if err != nil {
		vaultError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, v)
}

// vaultError answers err in plain text: its code, then its client-safe
// message (for INTERNAL_ERROR only "internal error"; err itself goes to
// the request's log line, as httpx.WriteError does). No vault error
// carries a value.
func vaultError(w http.ResponseWriter, err error) {
	code := sandbox.CodeOf(err)
	msg := sandbox.MessageOf(err)
	if code == sandbox.CodeInternal {
		msg = "internal error"
	}
	httpx.RecordError(w, err)
	http.Error(w, string(code)+": "+msg, sandbox.StatusOf(code))
}

// decodeVaultBody reads a JSON body into v strictly: no unknown fields,
// one value. Its errors name the offset or the field, never the body's
// content.
func (s *Server) decodeVaultBody(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := httpx.ReadBody(w, r, s.cfg.MaxBodyBytes)
	if err == nil {
		err = decodeStrict(body, v)
		clear(body)
	}
	if err != nil {
		vaultError(w, err)
		return false
	}
	return true
}

// decodeStrict decodes body, one JSON value of v's shape without unknown
// fields, into v.
func decodeStrict(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	if err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid JSON body: %s", jsonProblem(err))
	}
	return nil
}

// jsonProblem describes a decoding error without quoting the input (a
// syntax error's message may hold a character of a value).
func jsonProblem(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("syntax error at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("field %s must be %s, not a JSON %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ")
	case err.Error() == "EOF" || err.Error() == "unexpected EOF":
		return "the body ends early"
	case err.Error() == "more than one JSON value":
		return err.Error()
	}
	return "not a JSON value of the expected shape"
}
