package wire

import (
	"net/http"

	"github.com/astrabox/astrabox/sandbox"
)

// answered are the codes the in-box daemon answers with. It is part of
// execd's wire contract, so the daemon (which answers with their statuses)
// and its client (which reports them for errors that arrive inside a
// stream) read the same set; the statuses themselves are the sandbox
// contract's one table (sandbox.StatusOf).
var answered = map[sandbox.Code]bool{
	sandbox.CodeInvalidRequest:      true,
	sandbox.CodeMissingQuery:        true,
	sandbox.CodeInvalidPath:         true,
	sandbox.CodeInvalidFileMetadata: true,
	sandbox.CodeUnauthorized:        true,
	sandbox.CodeNotFound:            true,
	sandbox.CodeFileNotFound:        true,
	sandbox.CodeCommandNotFound:     true,
	sandbox.CodeSessionNotFound:     true,
	sandbox.CodeContextNotFound:     true,
	sandbox.CodeSandboxNotFound:     true,
	sandbox.CodeConflict:            true,
	sandbox.CodeAlreadyExists:       true,
	sandbox.CodePayloadTooLarge:     true,
	sandbox.CodeRangeNotSatisfiable: true,
	sandbox.CodeUploadVerification:  true,
	sandbox.CodeTooManyRequests:     true,
	sandbox.CodeNotSupported:        true,
	sandbox.CodeUpstreamUnreachable: true,
	sandbox.CodeUnavailable:         true,
	sandbox.CodeRuntime:             true,
	sandbox.CodeInternal:            true,
}

// StatusOf is the HTTP status execd answers code with: the table's status
// for a code execd answers, 500 for any other.
func StatusOf(code sandbox.Code) int {
	if answered[code] {
		return sandbox.StatusOf(code)
	}
	return http.StatusInternalServerError
}
