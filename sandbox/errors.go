package sandbox

import (
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error code. Codes appear on the wire as
// the `code` field of `{code, message}` error bodies and never change meaning.
type Code string

// Error codes shared by execd and the lifecycle API. The names that OpenSandbox
// defines keep their OpenSandbox spelling so its SDKs recognise them.
const (
	CodeInvalidRequest      Code = "INVALID_REQUEST_BODY"
	CodeMissingQuery        Code = "MISSING_QUERY"
	CodeInvalidPath         Code = "INVALID_PATH"
	CodeUnauthorized        Code = "UNAUTHORIZED"
	CodeFileNotFound        Code = "FILE_NOT_FOUND"
	CodeNotFound            Code = "NOT_FOUND"
	CodeCommandNotFound     Code = "COMMAND_NOT_FOUND"
	CodeSessionNotFound     Code = "SESSION_NOT_FOUND"
	CodeContextNotFound     Code = "CONTEXT_NOT_FOUND"
	CodeSandboxNotFound     Code = "SANDBOX_NOT_FOUND"
	CodeImageNotFound       Code = "IMAGE_NOT_FOUND"
	CodeConflict            Code = "CONFLICT"
	CodeAlreadyExists       Code = "ALREADY_EXISTS"
	CodePayloadTooLarge     Code = "PAYLOAD_TOO_LARGE"
	CodeRangeNotSatisfiable Code = "RANGE_NOT_SATISFIABLE"
	CodeTooManyRequests     Code = "TOO_MANY_REQUESTS"
	CodeUploadVerification  Code = "UPLOAD_VERIFICATION_FAILED"
	CodeIdempotencyMismatch Code = "IDEMPOTENCY_KEY_REUSED"
	CodeInvalidFileMetadata Code = "INVALID_FILE_METADATA"
	CodeNotSupported        Code = "NOT_SUPPORTED"
	CodeCapability          Code = "CAPABILITY_NOT_SUPPORTED"
	CodeBackendDisabled     Code = "SANDBOX_BACKEND_DISABLED"
	CodeUpstreamUnreachable Code = "UPSTREAM_UNREACHABLE"
	CodeTimeout             Code = "TIMEOUT"
	CodeUnavailable         Code = "UNAVAILABLE"
	CodeRuntime             Code = "RUNTIME_ERROR"
	CodeInternal            Code = "INTERNAL_ERROR"
)

// statusByCode is the one table that maps error codes to HTTP statuses.
var statusByCode = map[Code]int{
	CodeInvalidRequest:      http.StatusBadRequest,
	CodeMissingQuery:        http.StatusBadRequest,
	CodeInvalidPath:         http.StatusBadRequest,
	CodeInvalidFileMetadata: http.StatusBadRequest,
	CodeCapability:          http.StatusBadRequest,
	CodeBackendDisabled:     http.StatusBadRequest,
	CodeUnauthorized:        http.StatusUnauthorized,
	CodeFileNotFound:        http.StatusNotFound,
	CodeNotFound:            http.StatusNotFound,
	CodeCommandNotFound:     http.StatusNotFound,
	CodeSessionNotFound:     http.StatusNotFound,
	CodeContextNotFound:     http.StatusNotFound,
	CodeSandboxNotFound:     http.StatusNotFound,
	CodeImageNotFound:       http.StatusNotFound,
	CodeConflict:            http.StatusConflict,
	CodeAlreadyExists:       http.StatusConflict,
	CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	CodeRangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
	CodeUploadVerification:  http.StatusUnprocessableEntity,
	CodeIdempotencyMismatch: http.StatusUnprocessableEntity,
	CodeTooManyRequests:     http.StatusTooManyRequests,
	CodeNotSupported:        http.StatusNotImplemented,
	CodeUpstreamUnreachable: http.StatusBadGateway,
	CodeTimeout:             http.StatusGatewayTimeout,
	CodeUnavailable:         http.StatusServiceUnavailable,
	CodeRuntime:             http.StatusInternalServerError,
	CodeInternal:            http.StatusInternalServerError,
}

// HTTPStatus is the HTTP status that carries c; unknown codes map to 500.
func (c Code) HTTPStatus() int {
	if s, ok := statusByCode[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Error is an error with a stable Code. Message is safe to show to API
// clients; Err, when set, is the wrapped cause (for logs and errors.Is).
type Error struct {
	Code    Code
	Message string
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil && e.Message == "" {
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	}
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message. A %w verb in
// format wraps its operand, as with fmt.Errorf.
func Errorf(code Code, format string, args ...any) *Error {
	wrapped := fmt.Errorf(format, args...)
	return &Error{Code: code, Message: wrapped.Error(), Err: errors.Unwrap(wrapped)}
}

// CodeOf returns the Code of the first *Error in err's chain, CodeNotSupported
// for ErrUnsupported, or CodeInternal.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	if errors.Is(err, ErrUnsupported) {
		return CodeNotSupported
	}
	if errors.Is(err, ErrNotFound) {
		return CodeSandboxNotFound
	}
	return CodeInternal
}

// MessageOf is the client-safe message for err: the Message of its *Error,
// or err's text.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

var (
	// ErrUnsupported is wrapped by providers for operations their
	// Capabilities do not offer.
	ErrUnsupported = errors.New("operation not supported by this backend")
	// ErrNotFound is wrapped by providers when a box id is unknown to them.
	ErrNotFound = errors.New("sandbox not found")
	// ErrBadStateBlob is wrapped by Attacher.Attach (and by a provider
	// reading its own records) for a state blob it cannot read: not a
	// JSON object of its format, or of a version it does not know.
	ErrBadStateBlob = errors.New("unreadable provider state blob")
)
