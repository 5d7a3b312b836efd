package sandbox

import (
	"errors"
	"fmt"
	"reflect"
)

// Code is a stable, machine-readable error code. Codes appear on the wire as
// the `code` field of `{code, message}` error bodies and never change meaning.
type Code string

// Error codes shared by execd and the lifecycle API. The names that OpenSandbox
// defines keep their OpenSandbox spelling so its SDKs recognise them. The
// HTTP status that carries each code is in the one table of status.go.
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
	// CodeLimitOutOfRange refuses a requested limit (cpu, memory, pids,
	// disk, a timeout or an expiry) outside the server's bounds; the
	// message names the bound.
	CodeLimitOutOfRange     Code = "LIMIT_OUT_OF_RANGE"
	CodeUpstreamUnreachable Code = "UPSTREAM_UNREACHABLE"
	CodeTimeout             Code = "TIMEOUT"
	CodeUnavailable         Code = "UNAVAILABLE"
	CodeRuntime             Code = "RUNTIME_ERROR"
	CodeInternal            Code = "INTERNAL_ERROR"
)

// Error is an error with a stable Code.
//
// Message is the client-facing text and must never carry internal details
// (store, host or backend error text): it is what the API and execd put in
// the `message` field of their error bodies. Err, when set, is the cause,
// for logs and for errors.Is and errors.As; Error() carries the full chain.
type Error struct {
	Code    Code
	Message string
	Err     error
	// detail is the full formatted text of an Errorf, causes included,
	// which Error() reports in place of Message and Err.
	detail string
}

// Error is the log form of e: its code and its full text, causes included.
func (e *Error) Error() string {
	switch {
	case e.detail != "":
		return fmt.Sprintf("%s: %s", e.Code, e.detail)
	case e.Err != nil && e.Message == "":
		return fmt.Sprintf("%s: %v", e.Code, e.Err)
	case e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

// Unwrap returns e's cause.
func (e *Error) Unwrap() error { return e.Err }

// internalMessage is the client-facing text of an error that carries no
// client-safe message of its own.
const internalMessage = "internal error"

// Errorf returns an *Error with code and a message formatted as by
// fmt.Errorf. A %w verb wraps its operand (the result's Err; errors.Is and
// errors.As reach every %w operand) and Error() carries the operand's full
// text, but Message shows each %w operand only as MessageOf does: the
// Message of the *Error it is or wraps, the text of the contract's
// sentinels, "internal error" for anything else. So a client never sees
// wrapped internal text; to show an error's text deliberately (a parse
// error of the client's own input, say), format it with %v.
func Errorf(code Code, format string, args ...any) *Error {
	full := fmt.Errorf(format, args...)
	var wrapped []error
	switch u := full.(type) {
	case interface{ Unwrap() error }:
		wrapped = []error{u.Unwrap()}
	case interface{ Unwrap() []error }:
		wrapped = u.Unwrap()
	}
	if len(wrapped) == 0 {
		return &Error{Code: code, Message: full.Error()}
	}
	// Render the message again with every %w operand replaced by its
	// client-safe text. Operands are recognised by identity; an error
	// value that cannot be compared is masked wherever it appears.
	masked := make([]any, len(args))
	for i, a := range args {
		masked[i] = a
		if err, ok := a.(error); ok && isWrapped(err, wrapped) {
			masked[i] = safeText(MessageOf(err))
		}
	}
	e := &Error{Code: code, Message: fmt.Errorf(format, masked...).Error(), detail: full.Error()}
	if len(wrapped) == 1 {
		e.Err = wrapped[0]
	} else {
		e.Err = full // its Unwrap() []error reaches every operand
	}
	return e
}

// isWrapped reports whether err is one of wrapped (by identity), or is of
// a type that cannot be compared (masked for safety).
func isWrapped(err error, wrapped []error) bool {
	if !reflect.TypeOf(err).Comparable() {
		return true
	}
	for _, w := range wrapped {
		if w != nil && reflect.TypeOf(w).Comparable() && w == err {
			return true
		}
	}
	return false
}

// safeText stands in for a %w operand when Errorf renders Message. It is
// an error so that %w still accepts it.
type safeText string

func (t safeText) Error() string { return string(t) }

// CodeOf returns the Code of the first *Error in err's chain,
// CodeNotSupported for ErrUnsupported, CodeSandboxNotFound for ErrNotFound,
// or CodeInternal.
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

// MessageOf is the client-safe message for err: the Message of the first
// *Error in its chain (or, when that is empty, its cause's MessageOf), the
// text of ErrUnsupported or ErrNotFound, or "internal error". It never
// returns the text of an error that is not a sandbox.Error or sentinel.
func MessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) && e != nil {
		if e.Message != "" {
			return e.Message
		}
		if e.Err != nil {
			return MessageOf(e.Err)
		}
		return internalMessage
	}
	for _, sentinel := range []error{ErrUnsupported, ErrNotFound} {
		if errors.Is(err, sentinel) {
			return sentinel.Error()
		}
	}
	return internalMessage
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
