package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// uncomparable is an error type whose values cannot be compared with ==.
type uncomparable struct{ parts []string }

func (u uncomparable) Error() string { return strings.Join(u.parts, "/") }

func TestErrorfMessagesNeverShowWrappedInternalText(t *testing.T) {
	internal := errors.New("pq: connection to 10.0.0.7:5432 refused")
	coded := Errorf(CodeImageNotFound, "image %q not found", "busybox")
	tests := []struct {
		name    string
		err     *Error
		message string   // the client-facing Message
		logs    []string // what Error() must still carry
		is      []error  // what errors.Is must reach
	}{
		{"no operands", Errorf(CodeConflict, "sandbox %s is %s", "b1", "Paused"),
			"sandbox b1 is Paused", []string{"CONFLICT", "sandbox b1 is Paused"}, nil},
		{"wrapped internal error", Errorf(CodeRuntime, "start command: %w", internal),
			"start command: internal error", []string{"RUNTIME_ERROR", internal.Error()}, []error{internal}},
		{"wrapped internal error in a chain", Errorf(CodeRuntime, "save: %w", fmt.Errorf("tx: %w", internal)),
			"save: internal error", []string{internal.Error()}, []error{internal}},
		{"wrapped coded error shows its message", Errorf(CodeInvalidRequest, "create: %w", coded),
			`create: image "busybox" not found`, []string{`image "busybox" not found`}, []error{coded}},
		{"coded error under a plain wrapper", Errorf(CodeInvalidRequest, "create: %w", fmt.Errorf("docker: %w", coded)),
			`create: image "busybox" not found`, []string{"docker: "}, []error{coded}},
		{"sentinel text is client-safe", Errorf(CodeNotSupported, "pause: %w", fmt.Errorf("cgroup v1 at /sys/fs: %w", ErrUnsupported)),
			"pause: " + ErrUnsupported.Error(), []string{"cgroup v1 at /sys/fs"}, []error{ErrUnsupported}},
		{"two operands", Errorf(CodeRuntime, "%w and %w", internal, coded),
			`internal error and image "busybox" not found`, []string{internal.Error()}, []error{internal, coded}},
		{"%v is the caller's choice to show text", Errorf(CodeInvalidRequest, "invalid JSON body: %v", errors.New("unexpected EOF")),
			"invalid JSON body: unexpected EOF", nil, nil},
		{"the same error under %w and %v is masked in both", Errorf(CodeRuntime, "%w (%v)", internal, internal),
			"internal error (internal error)", []string{internal.Error()}, []error{internal}},
		{"an uncomparable operand is masked", Errorf(CodeRuntime, "x: %w", uncomparable{[]string{"secret"}}),
			"x: internal error", []string{"secret"}, nil},
		{"flags and widths", Errorf(CodeRuntime, "%-5s|%3d|%w", "ab", 7, fs.ErrPermission),
			"ab   |  7|internal error", []string{fs.ErrPermission.Error()}, []error{fs.ErrPermission}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.err.Message != tt.message {
				t.Errorf("Message %q, want %q", tt.err.Message, tt.message)
			}
			if got := MessageOf(fmt.Errorf("outer: %w", tt.err)); got != tt.message {
				t.Errorf("MessageOf %q, want %q", got, tt.message)
			}
			for _, s := range tt.logs {
				if !strings.Contains(tt.err.Error(), s) {
					t.Errorf("Error() %q lacks %q", tt.err.Error(), s)
				}
			}
			for _, target := range tt.is {
				if !errors.Is(tt.err, target) {
					t.Errorf("errors.Is(%v, %v) is false", tt.err, target)
				}
			}
		})
	}
}

func TestMessageOfAndCodeOf(t *testing.T) {
	internal := errors.New("open /var/lib/astrabox/db: permission denied")
	tests := []struct {
		name    string
		err     error
		code    Code
		message string
	}{
		{"plain error", internal, CodeInternal, "internal error"},
		{"wrapped plain error", fmt.Errorf("get sandbox: %w", internal), CodeInternal, "internal error"},
		{"coded error", &Error{Code: CodeConflict, Message: "busy"}, CodeConflict, "busy"},
		{"coded error under wrappers", fmt.Errorf("a: %w", fmt.Errorf("b: %w", &Error{Code: CodeTimeout, Message: "slow", Err: internal})), CodeTimeout, "slow"},
		{"coded error without a message", &Error{Code: CodeRuntime, Err: internal}, CodeRuntime, "internal error"},
		{"empty message falls to the cause's", &Error{Code: CodeRuntime, Err: &Error{Code: CodeConflict, Message: "inner"}}, CodeRuntime, "inner"},
		{"unsupported sentinel", fmt.Errorf("docker at unix:///run/x.sock: %w", ErrUnsupported), CodeNotSupported, ErrUnsupported.Error()},
		{"not found sentinel", fmt.Errorf("inspect 7f3a: %w", ErrNotFound), CodeSandboxNotFound, ErrNotFound.Error()},
		{"bad state blob is internal", fmt.Errorf("attach: %w", ErrBadStateBlob), CodeInternal, "internal error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := CodeOf(tt.err); got != tt.code {
				t.Errorf("CodeOf %q, want %q", got, tt.code)
			}
			if got := MessageOf(tt.err); got != tt.message {
				t.Errorf("MessageOf %q, want %q", got, tt.message)
			}
		})
	}
}

func TestErrorLogText(t *testing.T) {
	cause := errors.New("disk full")
	tests := []struct {
		err  *Error
		want string
	}{
		{&Error{Code: CodeConflict, Message: "busy"}, "CONFLICT: busy"},
		{&Error{Code: CodeRuntime, Err: cause}, "RUNTIME_ERROR: disk full"},
		{&Error{Code: CodeRuntime, Message: "write file", Err: cause}, "RUNTIME_ERROR: write file: disk full"},
		{Errorf(CodeRuntime, "write file: %w", cause), "RUNTIME_ERROR: write file: disk full"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("Error() %q, want %q", got, tt.want)
		}
	}
	if e := Errorf(CodeRuntime, "x: %w", cause); e.Unwrap() != cause {
		t.Errorf("Unwrap() %v, want the %%w operand", e.Unwrap())
	}
}
