package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api/httpx"
	"github.com/astrabox/astrabox/egress/credproxy"
	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
)

// TestStatusOfEveryCode lists every code the server answers with and its
// status. A code registered without a row here fails the test, so a new
// code is given its status deliberately.
func TestStatusOfEveryCode(t *testing.T) {
	want := map[sandbox.Code]int{
		sandbox.CodeInvalidRequest:      400,
		sandbox.CodeMissingQuery:        400,
		sandbox.CodeInvalidPath:         400,
		sandbox.CodeInvalidFileMetadata: 400,
		sandbox.CodeCapability:          400,
		sandbox.CodeBackendDisabled:     400,
		sandbox.CodeLimitOutOfRange:     400,
		sandbox.CodeUnauthorized:        401,
		identity.CodeTokenExpired:       401,
		identity.CodeForbidden:          403,
		sandbox.CodeFileNotFound:        404,
		sandbox.CodeNotFound:            404,
		sandbox.CodeCommandNotFound:     404,
		sandbox.CodeSessionNotFound:     404,
		sandbox.CodeContextNotFound:     404,
		sandbox.CodeSandboxNotFound:     404,
		sandbox.CodeImageNotFound:       404,
		sandbox.CodeConflict:            409,
		sandbox.CodeAlreadyExists:       409,
		sandbox.CodePayloadTooLarge:     413,
		sandbox.CodeRangeNotSatisfiable: 416,
		sandbox.CodeUploadVerification:  422,
		sandbox.CodeIdempotencyMismatch: 422,
		sandbox.CodeTooManyRequests:     429,
		sandbox.CodeNotSupported:        501,
		sandbox.CodeUpstreamUnreachable: 502,
		sandbox.CodeTimeout:             504,
		sandbox.CodeUnavailable:         503,
		sandbox.CodeRuntime:             500,
		sandbox.CodeInternal:            500,
		platform.CodeAgentNotFound:      404,
		// platform.CodeSessionNotFound is sandbox.CodeSessionNotFound's
		// spelling: one code, registered by both with one status.
		platform.CodeProfileNotFound:     404,
		platform.CodeInvalid:             400,
		platform.CodeSessionBusy:         409,
		platform.CodeVersionConflict:     409,
		platform.CodeInteractionClosed:   409,
		platform.CodeEngineNotInstalled:  400,
		platform.CodeSessionDeleted:      410,
		platform.CodeVaultNotFound:       404,
		platform.CodeSecretNotFound:      404,
		platform.CodeVaultInUse:          409,
		platform.CodeDeliveryUnsupported: 400,
		credproxy.CodeNotEnabled:         412,
		credproxy.CodeUnavailable:        412,
		credproxy.CodeNotFound:           404,
		credproxy.CodeExists:             409,
		credproxy.CodeRevisionMismatch:   409,
		credproxy.CodeCredentialNotFound: 404,
		credproxy.CodeBindingNotFound:    404,
		CodeServiceWorkerRefused:         403,
	}
	for code, status := range want {
		if got := sandbox.StatusOf(code); got != status {
			t.Errorf("StatusOf(%s) = %d, want %d", code, got, status)
		}
	}
	for code := range sandbox.Statuses() {
		if _, ok := want[code]; !ok {
			t.Errorf("code %s is registered but has no row in this test", code)
		}
	}
	if got := sandbox.StatusOf("NO_SUCH_CODE"); got != http.StatusInternalServerError {
		t.Errorf("an unregistered code: %d, want 500", got)
	}
}

// TestWriteErrorKeepsInternalTextOut answers errors that wrap internal
// causes: the body has the code's status and a safe message, never the
// cause's text, which the request's log line carries instead.
func TestWriteErrorKeepsInternalTextOut(t *testing.T) {
	const secret = "dial unix /run/astrabox/box-7f3a.sock: connect: refused"
	internal := errors.New(secret)
	tests := []struct {
		name    string
		err     error
		status  int
		code    sandbox.Code
		message string
	}{
		{"plain internal error", fmt.Errorf("get sandbox: %w", internal), 500, sandbox.CodeInternal, "internal error"},
		{"coded error wrapping an internal one", sandbox.Errorf(sandbox.CodeRuntime, "start box: %w", internal), 500, sandbox.CodeRuntime, "start box: internal error"},
		{"coded error under a wrapper", fmt.Errorf("pause: %w", sandbox.Errorf(sandbox.CodeConflict, "sandbox b1 is Paused: %w", internal)), 409, sandbox.CodeConflict, "sandbox b1 is Paused: internal error"},
		{"not-found sentinel under a wrapper", fmt.Errorf("delete sandbox b1 (%s): %w", secret, sandbox.ErrNotFound), 404, sandbox.CodeSandboxNotFound, sandbox.ErrNotFound.Error()},
		{"internal code with its own message", &sandbox.Error{Code: sandbox.CodeInternal, Message: secret}, 500, sandbox.CodeInternal, "internal error"},
		{"explicit message and a cause", &sandbox.Error{Code: sandbox.CodeUpstreamUnreachable, Message: "sandbox b1: cannot reach its execd", Err: internal}, 502, sandbox.CodeUpstreamUnreachable, "sandbox b1: cannot reach its execd"},
		{"platform code", sandbox.Errorf(platform.CodeSessionDeleted, "session s1 was deleted: %w", internal), 410, platform.CodeSessionDeleted, "session s1 was deleted: internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs strings.Builder
			s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil)), mux: http.NewServeMux()}
			s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) { httpx.WriteError(w, tt.err) })
			w := httptest.NewRecorder()
			s.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
			body, _ := io.ReadAll(w.Body)
			if strings.Contains(string(body), "refused") || strings.Contains(string(body), "/run/") {
				t.Fatalf("the answer leaks the internal cause: %s", body)
			}
			var er ErrorResponse
			if err := json.Unmarshal(body, &er); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.status || er.Code != string(tt.code) || er.Message != tt.message {
				t.Fatalf("%d %s %q, want %d %s %q", w.Code, er.Code, er.Message, tt.status, tt.code, tt.message)
			}
			if tt.status >= 500 && !strings.Contains(logs.String(), "refused") {
				t.Fatalf("the log lacks the cause: %s", logs.String())
			}
		})
	}
}
