package wire

import (
	"net/http"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

func TestStatusOf(t *testing.T) {
	tests := []struct {
		code sandbox.Code
		want int
	}{
		{sandbox.CodeInvalidRequest, http.StatusBadRequest},
		{sandbox.CodeMissingQuery, http.StatusBadRequest},
		{sandbox.CodeInvalidPath, http.StatusBadRequest},
		{sandbox.CodeInvalidFileMetadata, http.StatusBadRequest},
		{sandbox.CodeUnauthorized, http.StatusUnauthorized},
		{sandbox.CodeNotFound, http.StatusNotFound},
		{sandbox.CodeFileNotFound, http.StatusNotFound},
		{sandbox.CodeCommandNotFound, http.StatusNotFound},
		{sandbox.CodeSessionNotFound, http.StatusNotFound},
		{sandbox.CodeContextNotFound, http.StatusNotFound},
		{sandbox.CodeSandboxNotFound, http.StatusNotFound},
		{sandbox.CodeConflict, http.StatusConflict},
		{sandbox.CodeAlreadyExists, http.StatusConflict},
		{sandbox.CodePayloadTooLarge, http.StatusRequestEntityTooLarge},
		{sandbox.CodeRangeNotSatisfiable, http.StatusRequestedRangeNotSatisfiable},
		{sandbox.CodeUploadVerification, http.StatusUnprocessableEntity},
		{sandbox.CodeTooManyRequests, http.StatusTooManyRequests},
		{sandbox.CodeNotSupported, http.StatusNotImplemented},
		{sandbox.CodeUpstreamUnreachable, http.StatusBadGateway},
		{sandbox.CodeUnavailable, http.StatusServiceUnavailable},
		{sandbox.CodeRuntime, http.StatusInternalServerError},
		{sandbox.CodeInternal, http.StatusInternalServerError},
		// Codes execd does not answer, and unknown ones: 500.
		{sandbox.CodeBackendDisabled, http.StatusInternalServerError},
		{"NO_SUCH_CODE", http.StatusInternalServerError},
	}
	for _, tt := range tests {
		if got := StatusOf(tt.code); got != tt.want {
			t.Errorf("StatusOf(%s) = %d, want %d", tt.code, got, tt.want)
		}
	}
	if len(answered) != len(tests)-2 {
		t.Errorf("execd answers %d codes and this test lists %d: give a new code its row", len(answered), len(tests)-2)
	}
}
