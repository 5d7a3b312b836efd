package wire

import (
	"net/http"

	"github.com/astrabox/astrabox/sandbox"
)

// statusByCode is execd's own code → HTTP status table: the codes the
// in-box daemon answers with. It is part of execd's wire contract, so the
// daemon (which answers with these statuses) and its client (which reports
// them for errors that arrive inside a stream) read the same table. The
// server's API layer keeps its own table (package api); execd never
// imports it.
var statusByCode = map[sandbox.Code]int{
	sandbox.CodeInvalidRequest:      http.StatusBadRequest,
	sandbox.CodeMissingQuery:        http.StatusBadRequest,
	sandbox.CodeInvalidPath:         http.StatusBadRequest,
	sandbox.CodeInvalidFileMetadata: http.StatusBadRequest,
	sandbox.CodeUnauthorized:        http.StatusUnauthorized,
	sandbox.CodeNotFound:            http.StatusNotFound,
	sandbox.CodeFileNotFound:        http.StatusNotFound,
	sandbox.CodeCommandNotFound:     http.StatusNotFound,
	sandbox.CodeSessionNotFound:     http.StatusNotFound,
	sandbox.CodeContextNotFound:     http.StatusNotFound,
	sandbox.CodeSandboxNotFound:     http.StatusNotFound,
	sandbox.CodeConflict:            http.StatusConflict,
	sandbox.CodeAlreadyExists:       http.StatusConflict,
	sandbox.CodePayloadTooLarge:     http.StatusRequestEntityTooLarge,
	sandbox.CodeRangeNotSatisfiable: http.StatusRequestedRangeNotSatisfiable,
	sandbox.CodeUploadVerification:  http.StatusUnprocessableEntity,
	sandbox.CodeTooManyRequests:     http.StatusTooManyRequests,
	sandbox.CodeNotSupported:        http.StatusNotImplemented,
	sandbox.CodeUpstreamUnreachable: http.StatusBadGateway,
	sandbox.CodeUnavailable:         http.StatusServiceUnavailable,
	sandbox.CodeRuntime:             http.StatusInternalServerError,
	sandbox.CodeInternal:            http.StatusInternalServerError,
}

// StatusOf is the HTTP status execd answers code with; codes execd does
// not answer map to 500.
func StatusOf(code sandbox.Code) int {
	if st, ok := statusByCode[code]; ok {
		return st
	}
	return http.StatusInternalServerError
}
