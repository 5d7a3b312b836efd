package api

import (
	"fmt"
	"net/http"
	"sync"

	"github.com/astrabox/astrabox/egress/credproxy"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// The API layer owns the one error code → HTTP status registry of the
// server. Each layer that defines codes contributes its statuses:
// the sandbox contract's codes, the platform's (platform.StatusByCode) and
// the Credential Vault's (credproxy.StatusByCode) are registered here at init; another layer registers its own with
// RegisterStatus before the server answers. A code nobody registered is
// answered with 500.
var statuses = struct {
	sync.RWMutex
	byCode map[sandbox.Code]int
}{byCode: map[sandbox.Code]int{}}

// RegisterStatus makes the API answer errors of code with HTTP status. It
// is meant for package initialisation; registering a code again with the
// same status is a no-op, with another status (or a status outside
// 400-599) a programming error, which panics.
func RegisterStatus(code sandbox.Code, status int) {
	if code == "" || status < 400 || status > 599 {
		panic(fmt.Sprintf("api: RegisterStatus(%q, %d): an error code needs a 4xx or 5xx status", code, status))
	}
	statuses.Lock()
	defer statuses.Unlock()
	if prev, ok := statuses.byCode[code]; ok && prev != status {
		panic(fmt.Sprintf("api: error code %s registered with status %d and %d", code, prev, status))
	}
	statuses.byCode[code] = status
}

// statusOf is the HTTP status of code: its registered status, else 500.
func statusOf(code sandbox.Code) int {
	statuses.RLock()
	defer statuses.RUnlock()
	if st, ok := statuses.byCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}

// sandboxStatuses are the statuses of the sandbox contract's codes (the
// lifecycle API and the errors it passes on from providers and execd).
var sandboxStatuses = map[sandbox.Code]int{
	sandbox.CodeInvalidRequest:      http.StatusBadRequest,
	sandbox.CodeMissingQuery:        http.StatusBadRequest,
	sandbox.CodeInvalidPath:         http.StatusBadRequest,
	sandbox.CodeInvalidFileMetadata: http.StatusBadRequest,
	sandbox.CodeCapability:          http.StatusBadRequest,
	sandbox.CodeBackendDisabled:     http.StatusBadRequest,
	sandbox.CodeLimitOutOfRange:     http.StatusBadRequest,
	sandbox.CodeUnauthorized:        http.StatusUnauthorized,
	sandbox.CodeFileNotFound:        http.StatusNotFound,
	sandbox.CodeNotFound:            http.StatusNotFound,
	sandbox.CodeCommandNotFound:     http.StatusNotFound,
	sandbox.CodeSessionNotFound:     http.StatusNotFound,
	sandbox.CodeContextNotFound:     http.StatusNotFound,
	sandbox.CodeSandboxNotFound:     http.StatusNotFound,
	sandbox.CodeImageNotFound:       http.StatusNotFound,
	sandbox.CodeConflict:            http.StatusConflict,
	sandbox.CodeAlreadyExists:       http.StatusConflict,
	sandbox.CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	sandbox.CodeRangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
	sandbox.CodeUploadVerification:  http.StatusUnprocessableEntity,
	sandbox.CodeIdempotencyMismatch: http.StatusUnprocessableEntity,
	sandbox.CodeTooManyRequests:     http.StatusTooManyRequests,
	sandbox.CodeNotSupported:        http.StatusNotImplemented,
	sandbox.CodeUpstreamUnreachable: http.StatusBadGateway,
	sandbox.CodeTimeout:             http.StatusGatewayTimeout,
	sandbox.CodeUnavailable:         http.StatusServiceUnavailable,
	sandbox.CodeRuntime:             http.StatusInternalServerError,
	sandbox.CodeInternal:            http.StatusInternalServerError,
}

func init() {
	for _, table := range []map[sandbox.Code]int{sandboxStatuses, platform.StatusByCode, credproxy.StatusByCode} {
		for code, status := range table {
			RegisterStatus(code, status)
		}
	}
}
