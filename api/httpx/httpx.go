// Package httpx holds the HTTP helpers the API's route packages (package
// api and the packages of its route sets) share, so that each has one
// implementation: JSON answers, error answers in the {code, message}
// shape with the status of the sandbox error-code registry
// (sandbox.StatusOf), strict JSON request bodies under a size limit, and
// the Recorder through which the server's request log line learns the
// status and the error a handler answered with.
//
// It imports the standard library and the sandbox contract only; nothing
// here authenticates, authorizes or logs.
package httpx

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// HeaderForwarded marks a request one replica forwarded to another; a
// forwarded request is never forwarded again, and its audit entry is the
// first replica's. Its value is the forwarding replica and a signature
// (SignForwarded) with the key the replicas share: the server drops a
// value it cannot verify (CheckForwarded), so a client cannot claim it.
const HeaderForwarded = "X-AstraBox-Forwarded-By"

// SignForwarded marks out, a request replica holder forwards, with
// HeaderForwarded signed by key over its method and target.
func SignForwarded(out *http.Request, key []byte, holder string) {
	out.Header.Set(HeaderForwarded, holder+" "+forwardedMAC(key, holder, out.Method, out.URL.RequestURI()))
}

// CheckForwarded removes r's HeaderForwarded unless SignForwarded made it
// with key for r's method and target, and reports whether it is kept.
func CheckForwarded(r *http.Request, key []byte) bool {
	v := r.Header.Get(HeaderForwarded)
	if v == "" {
		return false
	}
	holder, sig, ok := strings.Cut(v, " ")
	if !ok || len(key) == 0 || !hmac.Equal([]byte(sig), []byte(forwardedMAC(key, holder, r.Method, r.URL.RequestURI()))) {
		r.Header.Del(HeaderForwarded)
		return false
	}
	return true
}

func forwardedMAC(key []byte, holder, method, target string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("astrabox-forwarded\x00" + holder + "\x00" + method + "\x00" + target))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// WriteJSON answers status with v encoded as JSON (Content-Type
// application/json). An encoding error is dropped: the status is already
// sent.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// errorBody is the answer of WriteError, the OpenSandbox error shape
// (the api/wire package's ErrorResponse).
type errorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// WriteError answers with err's code (sandbox.CodeOf), the status the
// registry gives it (sandbox.StatusOf) and its client-safe message
// (sandbox.MessageOf): never the text of a wrapped internal error, and
// for INTERNAL_ERROR only "internal error". err itself (Error(): the full
// chain) is kept for the request's log line (RecordError).
func WriteError(w http.ResponseWriter, err error) {
	code := sandbox.CodeOf(err)
	msg := sandbox.MessageOf(err)
	if code == sandbox.CodeInternal {
		msg = "internal error"
	}
	RecordError(w, err)
	WriteJSON(w, sandbox.StatusOf(code), errorBody{Code: string(code), Message: msg})
}

// Route is one route a route package hands the server, which registers it
// behind its authentication.
type Route struct {
	// Pattern is an http.ServeMux pattern with its method, e.g.
	// "GET /api/v1/agents/{id}".
	Pattern string
	// Need is the scope a caller must hold (an identity.Scope's name:
	// "read", "write" or "admin"); the server refuses others with
	// FORBIDDEN before Handler runs.
	Need string
	// Audit, when set, is the action a successful answer (2xx) of the
	// route records in the audit log ("vault.delete"): the server adds the
	// caller, the request id and the target, named by the action's first
	// word and the route's {id} or {name} ("vault:v1"), with the route's
	// other path values as detail.
	Audit string
	// Handler serves the route; it neither authenticates nor checks Need.
	Handler http.HandlerFunc
}

// Answer writes v as JSON with status, or err (WriteError) when err is
// not nil: the tail of a handler that calls one method.
func Answer[T any](w http.ResponseWriter, status int, v T, err error) {
	if err != nil {
		WriteError(w, err)
		return
	}
	WriteJSON(w, status, v)
}

// NoContent answers 204, or err (WriteError) when err is not nil.
func NoContent(w http.ResponseWriter, err error) {
	if err != nil {
		WriteError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
