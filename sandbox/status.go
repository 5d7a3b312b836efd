package sandbox

import (
	"fmt"
	"net/http"
	"sync"
)

// The one error code → HTTP status table. The contract's own codes are in
// it from the start (contractStatuses); a layer that defines codes of its
// own (the platform, the credential proxy, the API edge) registers their
// statuses with RegisterStatus when its package initialises, so every
// server that links the layer answers them alike. A serving layer reads
// the table with StatusOf; execd answers only the codes it defines (see
// execd/wire) but with the statuses given here.
var statuses = struct {
	sync.RWMutex
	byCode map[Code]int
}{byCode: contractStatuses()}

// contractStatuses are the statuses of the sandbox contract's codes.
func contractStatuses() map[Code]int {
	return map[Code]int{
		CodeInvalidRequest:      http.StatusBadRequest,
		CodeMissingQuery:        http.StatusBadRequest,
		CodeInvalidPath:         http.StatusBadRequest,
		CodeInvalidFileMetadata: http.StatusBadRequest,
		CodeCapability:          http.StatusBadRequest,
		CodeBackendDisabled:     http.StatusBadRequest,
		CodeLimitOutOfRange:     http.StatusBadRequest,
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
}

// RegisterStatus makes every serving layer answer errors of code with HTTP
// status. It is meant for package initialisation; registering a code
// again with the same status is a no-op, with another status (or a status
// outside 400-599, or no code) a programming error, which panics.
func RegisterStatus(code Code, status int) {
	if code == "" || status < 400 || status > 599 {
		panic(fmt.Sprintf("sandbox: RegisterStatus(%q, %d): an error code needs a 4xx or 5xx status", code, status))
	}
	statuses.Lock()
	defer statuses.Unlock()
	if prev, ok := statuses.byCode[code]; ok && prev != status {
		panic(fmt.Sprintf("sandbox: error code %s registered with status %d and %d", code, prev, status))
	}
	statuses.byCode[code] = status
}

// RegisterStatuses registers every code of table (see RegisterStatus).
func RegisterStatuses(table map[Code]int) {
	for code, status := range table {
		RegisterStatus(code, status)
	}
}

// StatusOf is the HTTP status of code: its registered status, else 500.
func StatusOf(code Code) int {
	statuses.RLock()
	defer statuses.RUnlock()
	if st, ok := statuses.byCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// Statuses returns a copy of the table: every code registered so far with
// its status.
func Statuses() map[Code]int {
	statuses.RLock()
	defer statuses.RUnlock()
	out := make(map[Code]int, len(statuses.byCode))
	for code, status := range statuses.byCode {
		out[code] = status
	}
	return out
}
