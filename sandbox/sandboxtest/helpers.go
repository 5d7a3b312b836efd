package sandboxtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// run runs a foreground shell command in b and fails the test on a
// transport error.
func run(t testing.TB, b *Box, command string) *client.Execution {
	t.Helper()
	ex, err := b.Client.Run(ctxFor(t, 2*time.Minute), wire.RunCommandRequest{Command: command})
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return ex
}

// mustRun runs command and fails unless it exits 0; it returns stdout.
func mustRun(t testing.TB, b *Box, command string) string {
	t.Helper()
	ex := run(t, b, command)
	if ex.ExitCode != 0 {
		t.Fatalf("run %q: exit %d, stderr %q", command, ex.ExitCode, ex.Stderr)
	}
	return string(ex.Stdout)
}

// shell runs a foreground shell command in b as uid (nil: the box's
// default user, root in an isolating backend) and returns its exit code,
// stdout and stderr; a transport error fails the test.
func shell(t testing.TB, b *Box, uid *uint32, command string) (int, string, string) {
	t.Helper()
	ex, err := b.Client.Run(ctxFor(t, 2*time.Minute), wire.RunCommandRequest{Command: command, UID: uid})
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return ex.ExitCode, string(ex.Stdout), string(ex.Stderr)
}

func uidPtr(v uint32) *uint32 { return &v }

// isolating skips t unless the backend separates boxes from the host.
func isolating(t *testing.T, h Harness) {
	t.Helper()
	if iso := h.Provider().Capabilities().Isolation; iso == "" || iso == sandbox.IsolationNone {
		t.Skipf("backend %s does not isolate boxes (isolation %q)", h.Provider().Name(), iso)
	}
}

// raw sends an HTTP request straight to b's execd and returns the status
// and the decoded error body (if any).
func raw(t testing.TB, b *Box, method, path, contentType string, body io.Reader) (int, wire.ErrorResponse, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxFor(t, time.Minute), method, b.Client.BaseURL()+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if tok := b.Client.Token(); tok != "" {
		req.Header.Set(wire.HeaderAccessToken, tok)
	}
	resp, err := b.Client.HTTPClient().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var er wire.ErrorResponse
	_ = json.Unmarshal(data, &er)
	return resp.StatusCode, er, data
}

// wantCode fails unless err is an execd error with code.
func wantCode(t testing.TB, err error, code sandbox.Code) {
	t.Helper()
	if got := client.CodeOf(err); got != code {
		t.Fatalf("want error code %s, got %v", code, err)
	}
}

// eventually polls cond every few milliseconds until it is true or the
// deadline passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	delay := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(delay)
		delay = min(delay*2, 50*time.Millisecond)
	}
}

func jsonReader(s string) io.Reader { return strings.NewReader(s) }

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }
