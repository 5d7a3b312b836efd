package shipyard

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// Bay's error codes, as the shipyard-neo-sdk maps them to exceptions.
const (
	codeNotFound        = "not_found"
	codeFileNotFound    = "file_not_found"
	codeUnauthorized    = "unauthorized"
	codeForbidden       = "forbidden"
	codeValidation      = "validation_error"
	codeInvalidPath     = "invalid_path"
	codeCapability      = "capability_not_supported"
	codeExpired         = "sandbox_expired"
	codeTTLInfinite     = "sandbox_ttl_infinite"
	codeQuota           = "quota_exceeded"
	codeNotReady        = "session_not_ready"
	codeTimeout         = "timeout"
	codeConflict        = "conflict"
	codeShipError       = "ship_error"
	codeInternal        = "internal_error"
	codePayloadTooLarge = "payload_too_large"
)

// Error is an answer in Bay's error shape: {"error": {code, message,
// request_id, details}} with Status. Cause, when set, is logged only.
type Error struct {
	Status  int
	Code    string
	Message string
	Details map[string]any
	Cause   error
}

func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Code + ": " + e.Message + ": " + e.Cause.Error()
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Cause }

func newError(status int, code, msg string) *Error {
	return &Error{Status: status, Code: code, Message: msg}
}

func validation(msg string) *Error { return newError(http.StatusBadRequest, codeValidation, msg) }

// notReady is session_not_ready (503) with the delay a client should wait
// before it retries.
func notReady(id string) *Error {
	e := newError(http.StatusServiceUnavailable, codeNotReady, "sandbox "+id+" is starting")
	e.Details = map[string]any{"sandbox_id": id, "retry_after_ms": 1000}
	return e
}

// capability is capability_not_supported naming what was asked for and
// what the sandbox offers.
func capability(name string, msg string) *Error {
	e := newError(http.StatusBadRequest, codeCapability, msg)
	e.Details = map[string]any{"capability": name, "available": capabilities()}
	return e
}

// toError maps err onto Bay's codes: an *Error as it is; the sandbox
// contract's codes (from the lifecycle service or execd) by meaning; a
// context deadline as timeout; anything else as internal_error, whose
// text is never shown.
func toError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return &Error{Status: http.StatusGatewayTimeout, Code: codeTimeout, Message: "the operation timed out", Cause: err}
	}
	code := sandbox.CodeOf(err)
	if c := execdclient.CodeOf(err); c != "" {
		code = c
	}
	msg := sandbox.MessageOf(err)
	var ae *execdclient.APIError
	if errors.As(err, &ae) && ae.Message != "" {
		msg = ae.Message // execd's messages are client-safe
	}
	out := &Error{Message: msg, Cause: err}
	switch code {
	case sandbox.CodeInvalidRequest, sandbox.CodeMissingQuery, sandbox.CodeLimitOutOfRange,
		sandbox.CodeInvalidFileMetadata, sandbox.CodeBackendDisabled, sandbox.CodeImageNotFound:
		out.Status, out.Code = http.StatusBadRequest, codeValidation
	case sandbox.CodeInvalidPath:
		out.Status, out.Code = http.StatusBadRequest, codeInvalidPath
	case sandbox.CodeUnauthorized:
		out.Status, out.Code = http.StatusUnauthorized, codeUnauthorized
	case sandbox.CodeFileNotFound:
		out.Status, out.Code = http.StatusNotFound, codeFileNotFound
	case sandbox.CodeNotFound, sandbox.CodeSandboxNotFound, sandbox.CodeCommandNotFound,
		sandbox.CodeSessionNotFound, sandbox.CodeContextNotFound:
		out.Status, out.Code = http.StatusNotFound, codeNotFound
	case sandbox.CodeConflict, sandbox.CodeAlreadyExists, sandbox.CodeIdempotencyMismatch:
		out.Status, out.Code = http.StatusConflict, codeConflict
	case sandbox.CodeTooManyRequests:
		out.Status, out.Code = http.StatusTooManyRequests, codeQuota
	case sandbox.CodePayloadTooLarge:
		out.Status, out.Code = http.StatusRequestEntityTooLarge, codePayloadTooLarge
	case sandbox.CodeCapability, sandbox.CodeNotSupported:
		out.Status, out.Code = http.StatusBadRequest, codeCapability
		out.Details = map[string]any{"available": capabilities()}
	case sandbox.CodeTimeout:
		out.Status, out.Code = http.StatusGatewayTimeout, codeTimeout
	case sandbox.CodeUnavailable, sandbox.CodeUpstreamUnreachable, sandbox.CodeRuntime:
		out.Status, out.Code = http.StatusBadGateway, codeShipError
	default:
		out.Status, out.Code, out.Message = http.StatusInternalServerError, codeInternal, "internal error"
	}
	return out
}

// errorBody is Bay's error envelope.
type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Code      string         `json:"code"`
	Message   string         `json:"message"`
	RequestID string         `json:"request_id"`
	Details   map[string]any `json:"details"`
}

// writeError answers with err in Bay's shape; the request id is the one
// the server put on the answer (X-Request-ID).
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toError(err)
	if e.Status >= 500 {
		h.log.Warn("shipyard request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status,
			"request_id", w.Header().Get("X-Request-ID"), "err", err)
	}
	details := e.Details
	if details == nil {
		details = map[string]any{}
	}
	writeJSON(w, e.Status, errorBody{Error: errorFields{Code: e.Code, Message: e.Message,
		RequestID: w.Header().Get("X-Request-ID"), Details: details}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
