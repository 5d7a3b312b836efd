package execd_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/internal/wait"
)

func needBashExt(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
}

// rawEvent is one event of a stream read as the OpenSandbox SDKs read it.
type rawEvent struct {
	ID string
	wire.Event
}

// sseServer serves an execd and returns its base URL.
func sseServer(t *testing.T) string {
	t.Helper()
	srv := execd.New(execd.Config{WorkDir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")}})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return hs.URL
}

// streamSSE sends method target (with a JSON body when body is not nil),
// asking for text/event-stream, and returns the events of the answer, or
// the HTTP status of an error answer.
func streamSSE(t *testing.T, method, target string, body any) ([]rawEvent, int) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(testCtx(t), method, target, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, resp.StatusCode
	}
	var evs []rawEvent
	r := sse.NewReader(resp.Body, 0)
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs, resp.StatusCode
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := rawEvent{ID: f.ID}
		if err := json.Unmarshal([]byte(f.Data), &ev.Event); err != nil {
			t.Fatalf("event %q: %v", f.Data, err)
		}
		if ev.Event.Type != f.Event {
			t.Fatalf("SSE event %q carries type %q", f.Event, ev.Event.Type)
		}
		evs = append(evs, ev)
	}
}

// outputOf returns the texts and ids of the events of type typ.
func outputOf(evs []rawEvent, typ string) (texts, ids []string) {
	for _, ev := range evs {
		if ev.Type == typ {
			texts, ids = append(texts, ev.Text), append(ids, ev.ID)
		}
	}
	return texts, ids
}

// tail returns the types of the events after the output.
func tail(evs []rawEvent) []string {
	var out []string
	for _, ev := range evs {
		if ev.Type != wire.EventStdout && ev.Type != wire.EventStderr && ev.Type != wire.EventInit {
			out = append(out, ev.Type)
		}
	}
	return out
}

// TestCommandFraming: by default a command's stream is framed as
// OpenSandbox's execd frames it (one event per line, terminators stripped,
// a partial last line at exit, over-long lines cut, a failed command ending
// with its error event); framing=bytes keeps the byte-exact stream.
func TestCommandFraming(t *testing.T) {
	needBashExt(t)
	base := sseServer(t)
	long := strings.Repeat("x", wire.MaxLineBytes*2+100)
	for _, tc := range []struct {
		name, query, command string
		stdout, stderr       []string
		stdoutIDs            []string
		tail                 []string
		exit                 int
		// exact: output is byte-exact but its chunks are the pipe's reads,
		// so the chunks' concatenation and the last id are compared.
		exact bool
	}{
		{name: "one line", command: "echo connect-ok", stdout: []string{"connect-ok"}, stdoutIDs: []string{"11"},
			tail: []string{wire.EventComplete}},
		{name: "two lines of one write", command: "printf 'line-a\\nline-b\\n'", stdout: []string{"line-a", "line-b"},
			stdoutIDs: []string{"7", "14"}, tail: []string{wire.EventComplete}},
		{name: "partial last line", command: "echo a; printf 'no newline'", stdout: []string{"a", "no newline"},
			tail: []string{wire.EventComplete}},
		{name: "blank line and crlf", command: "printf 'a\\n\\nb\\r\\nc\\r'", stdout: []string{"a", "\n", "b", "c"},
			tail: []string{wire.EventComplete}},
		{name: "over-long line", command: "head -c " + strconv.Itoa(len(long)) + " /dev/zero | tr '\\0' x; echo",
			stdout: []string{long[:wire.MaxLineBytes], long[:wire.MaxLineBytes], long[:100]}, tail: []string{wire.EventComplete}},
		{name: "failed: error only", command: "echo partial; echo oops >&2; exit 3", stdout: []string{"partial"},
			stderr: []string{"oops"}, tail: []string{wire.EventError}, exit: 3},
		{name: "bytes: exact chunks", query: "?framing=bytes", command: "printf 'line-a\\nline-b\\n'",
			stdout: []string{"line-a\nline-b\n"}, stdoutIDs: []string{"14"}, tail: []string{wire.EventComplete}, exact: true},
		{name: "bytes: failed: error then complete", query: "?framing=bytes", command: "printf 'x'; exit 3",
			stdout: []string{"x"}, tail: []string{wire.EventError, wire.EventComplete}, exit: 3},
		{name: "lines named", query: "?framing=lines", command: "echo connect-ok", stdout: []string{"connect-ok"},
			tail: []string{wire.EventComplete}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, status := streamSSE(t, http.MethodPost, base+"/command"+tc.query, wire.RunCommandRequest{Command: tc.command})
			if status != http.StatusOK {
				t.Fatalf("status %d", status)
			}
			stdout, ids := outputOf(evs, wire.EventStdout)
			stderr, _ := outputOf(evs, wire.EventStderr)
			if tc.exact && len(stdout) > 0 {
				stdout, ids = []string{strings.Join(stdout, "")}, ids[len(ids)-1:]
			}
			if !slices.Equal(stdout, tc.stdout) || !slices.Equal(stderr, tc.stderr) {
				t.Fatalf("stdout %q stderr %q, want %q %q", stdout, stderr, tc.stdout, tc.stderr)
			}
			if tc.stdoutIDs != nil && !slices.Equal(ids, tc.stdoutIDs) {
				t.Fatalf("ids %q, want %q", ids, tc.stdoutIDs)
			}
			if got := tail(evs); !slices.Equal(got, tc.tail) {
				t.Fatalf("final events %q, want %q", got, tc.tail)
			}
			last := evs[len(evs)-1]
			if last.ExitCode == nil || *last.ExitCode != tc.exit {
				t.Fatalf("last event %+v: want exit_code %d", last, tc.exit)
			}
			for _, ev := range evs {
				if ev.Type == wire.EventError && (ev.Error == nil || ev.Error.Name != wire.CommandErrName || ev.Error.Value != strconv.Itoa(tc.exit)) {
					t.Fatalf("error event %+v", ev)
				}
			}
		})
	}
	if _, status := streamSSE(t, http.MethodPost, base+"/command?framing=words", wire.RunCommandRequest{Command: "true"}); status != http.StatusBadRequest {
		t.Fatalf("framing=words: status %d, want 400", status)
	}
}

// TestBackgroundLogFraming: the logs stream of a background command is
// framed by lines too, resumes by the ids of its line events, and keeps
// its exit code in the error event and the status; framing=bytes replays
// the bytes.
func TestBackgroundLogFraming(t *testing.T) {
	needBashExt(t)
	base := sseServer(t)
	evs, _ := streamSSE(t, http.MethodPost, base+"/command", wire.RunCommandRequest{Command: "echo one; echo two >&2; echo three; exit 2", Background: true})
	if len(evs) == 0 || evs[0].Type != wire.EventInit {
		t.Fatalf("background start: %+v", evs)
	}
	id := evs[0].Text
	c := client.New(base)
	wait.Until(t, 30*time.Second, "the background command to finish", func() bool {
		st, err := c.Status(testCtx(t), id)
		return err == nil && !st.Running
	})
	if st, _ := c.Status(testCtx(t), id); st.ExitCode == nil || *st.ExitCode != 2 {
		t.Fatalf("status %+v, want exit_code 2", st)
	}
	logs := base + "/command/" + id + "/logs?follow=true"
	evs, _ = streamSSE(t, http.MethodGet, logs, nil)
	stdout, ids := outputOf(evs, wire.EventStdout)
	stderr, _ := outputOf(evs, wire.EventStderr)
	if !slices.Equal(stdout, []string{"one", "three"}) || !slices.Equal(stderr, []string{"two"}) {
		t.Fatalf("stdout %q stderr %q", stdout, stderr)
	}
	if got := tail(evs); !slices.Equal(got, []string{wire.EventError}) || *evs[len(evs)-1].ExitCode != 2 {
		t.Fatalf("final events %q (%+v)", got, evs[len(evs)-1])
	}
	// Resuming from the id of the first line replays what followed it.
	evs, _ = streamSSE(t, http.MethodGet, logs+"&offset="+ids[0], nil)
	if stdout, _ := outputOf(evs, wire.EventStdout); !slices.Equal(stdout, []string{"three"}) {
		t.Fatalf("resumed from %s: stdout %q", ids[0], stdout)
	}
	evs, _ = streamSSE(t, http.MethodGet, logs+"&framing=bytes", nil)
	stdout, _ = outputOf(evs, wire.EventStdout)
	stderr, _ = outputOf(evs, wire.EventStderr)
	if strings.Join(stdout, "") != "one\nthree\n" || strings.Join(stderr, "") != "two\n" || !slices.Equal(tail(evs), []string{wire.EventError, wire.EventComplete}) {
		t.Fatalf("bytes: stdout %q stderr %q, final events %q", stdout, stderr, tail(evs))
	}
}

// TestSessionAndCodeFraming: bash sessions and code contexts frame the
// same way, and a failed shell run ends with its error event.
func TestSessionAndCodeFraming(t *testing.T) {
	needBashExt(t)
	base := sseServer(t)
	c := client.New(base)
	sid, err := c.CreateSession(testCtx(t), "")
	if err != nil {
		t.Fatal(err)
	}
	evs, _ := streamSSE(t, http.MethodPost, base+"/session/"+sid+"/run", wire.RunInSessionRequest{Command: "echo a; echo b; false"})
	if stdout, _ := outputOf(evs, wire.EventStdout); !slices.Equal(stdout, []string{"a", "b"}) || !slices.Equal(tail(evs), []string{wire.EventError}) {
		t.Fatalf("session run: %+v", evs)
	}
	evs, _ = streamSSE(t, http.MethodPost, base+"/code", wire.RunCodeRequest{Context: wire.CodeContext{Language: "bash"}, Code: "echo x; echo y; exit 4"})
	if stdout, _ := outputOf(evs, wire.EventStdout); !slices.Equal(stdout, []string{"x", "y"}) || !slices.Equal(tail(evs), []string{wire.EventCount, wire.EventError}) || *evs[len(evs)-1].ExitCode != 4 {
		t.Fatalf("bash code: %+v", evs)
	}
	if _, err := os.Stat("/usr/bin/python3"); err == nil {
		evs, _ = streamSSE(t, http.MethodPost, base+"/code", wire.RunCodeRequest{Code: "print('p')\nprint('q', end='')"})
		if stdout, _ := outputOf(evs, wire.EventStdout); !slices.Equal(stdout, []string{"p", "q"}) {
			t.Fatalf("python code: %+v", evs)
		}
	}
}

// TestClientExitCodes: the Go client gets the exit code of a failed
// command in both framings.
func TestClientExitCodes(t *testing.T) {
	needBashExt(t)
	base := sseServer(t)
	for _, tc := range []struct {
		name   string
		opts   []client.Option
		stdout string
	}{
		{"frames", nil, "a\nb"},
		{"sse bytes", []client.Option{client.WithEventStream()}, "a\nb"},
		{"sse lines", []client.Option{client.WithLineFraming()}, "a\nb\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := client.New(base, tc.opts...)
			ex, err := c.Run(testCtx(t), wire.RunCommandRequest{Command: "printf 'a\\nb'; exit 5"})
			if err != nil || ex.ExitCode != 5 || string(ex.Stdout) != tc.stdout || ex.Error == nil {
				t.Fatalf("%+v %v", ex, err)
			}
			ce, err := c.RunCode(testCtx(t), wire.RunCodeRequest{Context: wire.CodeContext{Language: "bash"}, Code: "exit 6"})
			if err != nil || ce.ExitCode != 6 {
				t.Fatalf("bash code: %+v %v", ce, err)
			}
		})
	}
}
