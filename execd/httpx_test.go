package execd

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// TestWriteError checks execd's answers: the status from execd's table and
// a message that never carries a wrapped internal error's text.
func TestWriteError(t *testing.T) {
	internal := errors.New("fork/exec /usr/lib/secret-helper: resource temporarily unavailable")
	tests := []struct {
		name    string
		err     error
		status  int
		code    sandbox.Code
		message string
	}{
		{"coded", sandbox.Errorf(sandbox.CodeCommandNotFound, "command %s not found", "c1"), 404, sandbox.CodeCommandNotFound, "command c1 not found"},
		{"coded, wrapping an internal error", sandbox.Errorf(sandbox.CodeRuntime, "start command: %w", internal), 500, sandbox.CodeRuntime, "start command: internal error"},
		{"plain", fmt.Errorf("spawn: %w", internal), 500, sandbox.CodeInternal, "internal error"},
		{"file system", fsError("read", "/workspace/a", &fs.PathError{Op: "open", Path: "/workspace/a", Err: fs.ErrNotExist}), 404, sandbox.CodeFileNotFound, "read /workspace/a: no such file or directory"},
		{"unsupported", fmt.Errorf("pty: %w", sandbox.ErrUnsupported), 501, sandbox.CodeNotSupported, sandbox.ErrUnsupported.Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			writeError(w, tt.err)
			var er wire.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &er); err != nil {
				t.Fatal(err)
			}
			if w.Code != tt.status || er.Code != string(tt.code) || er.Message != tt.message {
				t.Fatalf("%d %s %q, want %d %s %q", w.Code, er.Code, er.Message, tt.status, tt.code, tt.message)
			}
			if strings.Contains(er.Message, "secret-helper") {
				t.Fatalf("the message leaks the cause: %q", er.Message)
			}
		})
	}
}
