package sandbox

import (
	"net/http"
	"testing"
)

func TestRegisterStatus(t *testing.T) {
	const code Code = "TEST_ONLY_CODE"
	t.Cleanup(func() {
		statuses.Lock()
		delete(statuses.byCode, code)
		statuses.Unlock()
	})
	RegisterStatus(code, http.StatusTeapot)
	RegisterStatus(code, http.StatusTeapot) // again, the same: a no-op
	if got := StatusOf(code); got != http.StatusTeapot {
		t.Fatalf("StatusOf = %d", got)
	}
	tests := []struct {
		name   string
		code   Code
		status int
	}{
		{"another status for a registered code", code, http.StatusConflict},
		{"a success status", "TEST_OTHER", http.StatusOK},
		{"no status", "TEST_OTHER", 0},
		{"no code", "", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			RegisterStatus(tt.code, tt.status)
		})
	}
	if got := StatusOf(code); got != http.StatusTeapot {
		t.Fatalf("a refused registration changed the status: %d", got)
	}
	if got := StatusOf("NO_SUCH_CODE"); got != http.StatusInternalServerError {
		t.Errorf("an unregistered code: %d, want 500", got)
	}
}

// TestContractCodesHaveStatuses: every code the contract defines is in
// the table from the start.
func TestContractCodesHaveStatuses(t *testing.T) {
	for _, code := range []Code{CodeInvalidRequest, CodeMissingQuery, CodeInvalidPath, CodeUnauthorized,
		CodeFileNotFound, CodeNotFound, CodeCommandNotFound, CodeSessionNotFound, CodeContextNotFound,
		CodeSandboxNotFound, CodeImageNotFound, CodeConflict, CodeAlreadyExists, CodePayloadTooLarge,
		CodeRangeNotSatisfiable, CodeTooManyRequests, CodeUploadVerification, CodeIdempotencyMismatch,
		CodeInvalidFileMetadata, CodeNotSupported, CodeCapability, CodeBackendDisabled, CodeLimitOutOfRange,
		CodeUpstreamUnreachable, CodeTimeout, CodeUnavailable, CodeRuntime, CodeInternal} {
		if _, ok := Statuses()[code]; !ok {
			t.Errorf("code %s has no status", code)
		}
	}
}
