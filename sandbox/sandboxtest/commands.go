package sandboxtest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func testCommands(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)

	t.Run("ExitCodes", func(t *testing.T) {
		tests := []struct {
			command string
			want    int
		}{
			{"true", 0},
			{"false", 1},
			{"exit 42", 42},
			{"kill -9 $$", 137},
			{"definitely-not-a-command-xyz", 127},
		}
		for _, tt := range tests {
			t.Run(tt.command, func(t *testing.T) {
				ex := run(t, b, tt.command)
				if ex.ExitCode != tt.want {
					t.Fatalf("exit code %d, want %d", ex.ExitCode, tt.want)
				}
				if tt.want != 0 && (ex.Error == nil || ex.Error.Name != wire.CommandErrName || ex.Error.Value != strconv.Itoa(tt.want)) {
					t.Fatalf("error event %+v, want %s %d", ex.Error, wire.CommandErrName, tt.want)
				}
				if tt.want == 0 && ex.Error != nil {
					t.Fatalf("unexpected error event %+v", ex.Error)
				}
				st, err := b.Client.Status(ctxFor(t, time.Minute), ex.ID)
				if err != nil || st.Running || st.ExitCode == nil || *st.ExitCode != tt.want || st.FinishedAt == nil {
					t.Fatalf("status %+v, %v", st, err)
				}
			})
		}
	})

	t.Run("StdoutStderrSeparateAndOrdered", func(t *testing.T) {
		ex := run(t, b, "echo out1; echo err1 >&2; echo out2; seq 1 20000; echo err2 >&2")
		want := "out1\nout2\n" + seqString(1, 20000)
		if string(ex.Stdout) != want {
			t.Fatalf("stdout differs: got %d bytes, want %d", len(ex.Stdout), len(want))
		}
		if string(ex.Stderr) != "err1\nerr2\n" {
			t.Fatalf("stderr %q", ex.Stderr)
		}
	})

	t.Run("EnvAndCwd", func(t *testing.T) {
		dir := strings.TrimSpace(mustRun(t, b, "mkdir -p cwd-test/sub && cd cwd-test/sub && pwd"))
		ex, err := b.Client.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{
			Command: `printf '%s|%s|' "$FOO" "$EMPTY"; pwd`,
			Cwd:     dir,
			Envs:    map[string]string{"FOO": "bar baz $HOME", "EMPTY": ""},
		})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := string(ex.Stdout), "bar baz $HOME||"+dir+"\n"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		_, err = b.Client.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{Command: "pwd", Cwd: dir + "/missing"})
		wantCode(t, err, sandbox.CodeFileNotFound)
	})

	t.Run("LargeOutputIntact", func(t *testing.T) {
		// seq 1 9000000 writes 69,888,897 bytes (over 64 MiB).
		const n = 9000000
		want := sha256.New()
		var wantLen int
		for i := 1; i <= n; i++ {
			s := strconv.Itoa(i) + "\n"
			wantLen += len(s)
			want.Write([]byte(s))
		}
		got := sha256.New()
		var gotLen int
		exit := -1
		err := b.Client.RunStream(ctxFor(t, 5*time.Minute), wire.RunCommandRequest{Command: fmt.Sprintf("seq 1 %d", n)}, func(ev client.Event) error {
			switch ev.Type {
			case wire.EventStdout:
				got.Write([]byte(ev.Text))
				gotLen += len(ev.Text)
			case wire.EventStatus:
				t.Errorf("unexpected status event: %s", ev.Text)
			case wire.EventComplete:
				exit = *ev.ExitCode
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if exit != 0 || gotLen != wantLen || string(got.Sum(nil)) != string(want.Sum(nil)) {
			t.Fatalf("exit %d, %d bytes (want %d), hash match %v", exit, gotLen, wantLen, string(got.Sum(nil)) == string(want.Sum(nil)))
		}
	})

	t.Run("StreamsBeforeCommandEnds", func(t *testing.T) {
		mustRun(t, b, "rm -f stream-gate")
		var sawFirst, sawSecond bool
		err := b.Client.RunStream(ctxFor(t, time.Minute), wire.RunCommandRequest{
			Command: "echo first; while [ ! -e stream-gate ]; do sleep 0.01; done; echo second",
		}, func(ev client.Event) error {
			if ev.Type != wire.EventStdout {
				return nil
			}
			if strings.Contains(ev.Text, "first") && !sawFirst {
				sawFirst = true
				// The command cannot finish until this runs: the event
				// arrived while it was still running.
				mustRun(t, b, "touch stream-gate")
			}
			sawSecond = sawSecond || strings.Contains(ev.Text, "second")
			return nil
		})
		if err != nil || !sawFirst || !sawSecond {
			t.Fatalf("first=%v second=%v err=%v", sawFirst, sawSecond, err)
		}
	})

	t.Run("BackgroundStdinStatusLogs", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		ex, err := b.Client.Run(ctx, wire.RunCommandRequest{Command: "tr a-z A-Z", Background: true, Stdin: true})
		if err != nil || ex.ID == "" {
			t.Fatalf("start: %+v %v", ex, err)
		}
		st, err := b.Client.Status(ctx, ex.ID)
		if err != nil || !st.Running || !st.Background {
			t.Fatalf("status while running: %+v %v", st, err)
		}
		if err := b.Client.WriteStdin(ctx, ex.ID, strings.NewReader("hello\n"), false); err != nil {
			t.Fatal(err)
		}
		if err := b.Client.WriteStdin(ctx, ex.ID, strings.NewReader("world\n"), true); err != nil {
			t.Fatal(err)
		}
		waitFinished(t, b, ex.ID)
		data, next, lost, err := b.Client.Logs(ctx, ex.ID, 0)
		if err != nil || string(data) != "HELLO\nWORLD\n" || next != 12 || lost != 0 {
			t.Fatalf("logs %q next=%d lost=%d err=%v", data, next, lost, err)
		}
		data, next, _, err = b.Client.Logs(ctx, ex.ID, 6)
		if err != nil || string(data) != "WORLD\n" || next != 12 {
			t.Fatalf("logs from cursor 6: %q next=%d err=%v", data, next, err)
		}
		err = b.Client.WriteStdin(ctx, ex.ID, strings.NewReader("late"), false)
		wantCode(t, err, sandbox.CodeConflict)
	})

	t.Run("Signal", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		ex, err := b.Client.Run(ctx, wire.RunCommandRequest{Background: true,
			Command: `trap 'echo got-term; exit 5' TERM; echo ready; while true; do sleep 0.05; done`})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "ready", func() bool {
			data, _, _, _ := b.Client.Logs(ctx, ex.ID, 0)
			return contains(data, "ready")
		})
		if err := b.Client.Signal(ctx, ex.ID, "SIGTERM"); err != nil {
			t.Fatal(err)
		}
		st := waitFinished(t, b, ex.ID)
		data, _, _, _ := b.Client.Logs(ctx, ex.ID, 0)
		if *st.ExitCode != 5 || !contains(data, "got-term") {
			t.Fatalf("exit %d logs %q", *st.ExitCode, data)
		}
		wantCode(t, b.Client.Signal(ctx, ex.ID, "SIGTERM"), sandbox.CodeConflict)
		wantCode(t, b.Client.Signal(ctx, ex.ID, "SIGBOGUS"), sandbox.CodeInvalidRequest)
	})

	t.Run("InterruptKillsGroup", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		ex, err := b.Client.Run(ctx, wire.RunCommandRequest{Background: true, Command: "sleep 300 & echo $! > interrupt.pid; wait"})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "pid file", func() bool { return run(t, b, "test -s interrupt.pid").ExitCode == 0 })
		if err := b.Client.Interrupt(ctx, ex.ID); err != nil {
			t.Fatal(err)
		}
		st, err := b.Client.Status(ctx, ex.ID)
		if err != nil || st.Running {
			t.Fatalf("still running after interrupt: %+v %v", st, err)
		}
		eventually(t, 10*time.Second, "the command's child to die", func() bool { return processGone(t, b, "interrupt.pid") })
	})

	t.Run("TimeoutKillsProcessGroup", func(t *testing.T) {
		ex, err := b.Client.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{
			Command: "sleep 300 & echo $! > timeout.pid; wait", Timeout: 300})
		if err != nil {
			t.Fatal(err)
		}
		if ex.ExitCode != 137 {
			t.Fatalf("exit %d, want 137", ex.ExitCode)
		}
		st, _ := b.Client.Status(ctxFor(t, time.Minute), ex.ID)
		if !strings.Contains(st.Error, "timed out") {
			t.Fatalf("status error %q does not mention the timeout", st.Error)
		}
		eventually(t, 10*time.Second, "the command's child to die", func() bool { return processGone(t, b, "timeout.pid") })
	})

	t.Run("ReattachAfterDroppedConnection", func(t *testing.T) {
		mustRun(t, b, "rm -f reattach-gate")
		ctx, cancel := context.WithCancel(ctxFor(t, 2*time.Minute))
		var first []byte
		var id string
		var offset int64
		errStop := errors.New("drop")
		err := b.Client.RunStream(ctx, wire.RunCommandRequest{
			Command: "seq 1 50000; while [ ! -e reattach-gate ]; do sleep 0.01; done; seq 50001 100000",
		}, func(ev client.Event) error {
			switch ev.Type {
			case wire.EventInit:
				id = ev.Text
			case wire.EventStdout:
				first = append(first, ev.Text...)
				offset, _ = strconv.ParseInt(ev.ID, 10, 64)
				return errStop // drop the connection after the first output event
			}
			return nil
		})
		cancel()
		if !errors.Is(err, errStop) || id == "" || offset != int64(len(first)) {
			t.Fatalf("first stream: err=%v id=%q offset=%d len=%d", err, id, offset, len(first))
		}
		mustRun(t, b, "touch reattach-gate")
		rest := &client.Execution{}
		exit := -1
		err = b.Client.FollowLogs(ctxFor(t, 2*time.Minute), id, offset, true, func(ev client.Event) error {
			switch ev.Type {
			case wire.EventStdout:
				rest.Stdout = append(rest.Stdout, ev.Text...)
			case wire.EventStatus:
				if ev.Lost > 0 {
					t.Errorf("lost %d bytes", ev.Lost)
				}
			case wire.EventComplete:
				exit = *ev.ExitCode
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(first) + string(rest.Stdout); got != seqString(1, 100000) || exit != 0 {
			t.Fatalf("re-attached output differs (%d bytes, want %d), exit %d", len(got), len(seqString(1, 100000)), exit)
		}
	})

	t.Run("DisconnectKeepsRunningUnlessTied", func(t *testing.T) {
		for _, tied := range []bool{false, true} {
			ctx, cancel := context.WithCancel(ctxFor(t, time.Minute))
			var id string
			_ = b.Client.RunStream(ctx, wire.RunCommandRequest{Command: "sleep 2; echo done", KillOnDisconnect: tied}, func(ev client.Event) error {
				if ev.Type == wire.EventInit {
					id = ev.Text
					return errors.New("disconnect")
				}
				return nil
			})
			cancel()
			st := waitFinished(t, b, id)
			if tied && *st.ExitCode != 137 {
				t.Fatalf("tied command: exit %d, want 137 (killed)", *st.ExitCode)
			}
			if !tied && *st.ExitCode != 0 {
				t.Fatalf("untied command: exit %d, want 0", *st.ExitCode)
			}
		}
	})

	t.Run("ManyConcurrent", func(t *testing.T) {
		const n = 64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ex, err := b.Client.Run(ctxFor(t, 2*time.Minute), wire.RunCommandRequest{Command: fmt.Sprintf("echo %d; echo e%d >&2", i, i)})
				if err != nil {
					errs <- err
					return
				}
				if string(ex.Stdout) != fmt.Sprintf("%d\n", i) || string(ex.Stderr) != fmt.Sprintf("e%d\n", i) || ex.ExitCode != 0 {
					errs <- fmt.Errorf("command %d: %q %q %d", i, ex.Stdout, ex.Stderr, ex.ExitCode)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("OutputEdgeCases", func(t *testing.T) {
		// Binary frames carry output bytes exactly, valid UTF-8 or not.
		ex := run(t, b, `printf 'ok \377\376 end\n'; printf '\342\202\254\n'`)
		if string(ex.Stdout) != "ok \xff\xfe end\n€\n" {
			t.Fatalf("output bytes changed: %q", ex.Stdout)
		}
		ex = run(t, b, "head -c 4194304 /dev/zero | tr '\\0' x")
		if len(ex.Stdout) != 4<<20 || strings.Trim(string(ex.Stdout), "x") != "" {
			t.Fatalf("long line: %d bytes", len(ex.Stdout))
		}
	})

	t.Run("EventStreamEncoding", func(t *testing.T) {
		// The OpenSandbox encoding (SSE with JSON), which the SDKs use; the
		// other subtests use the Go client's binary frames.
		p := h.Provider()
		c := client.New("http://execd", client.WithToken(b.Info.AccessToken), client.WithEventStream(),
			client.WithDialer(func(ctx context.Context) (net.Conn, error) { return p.Dial(ctx, b.ID) }))
		ex, err := c.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{Command: `printf 'h\303\251 "q" \\\n'; echo err >&2; seq 1 5000; exit 3`})
		if err != nil {
			t.Fatal(err)
		}
		want := "h\u00e9 \"q\" \\\n" + seqString(1, 5000)
		if string(ex.Stdout) != want || string(ex.Stderr) != "err\n" || ex.ExitCode != 3 || ex.Error == nil || ex.Error.Value != "3" {
			t.Fatalf("stdout %q... stderr %q exit %d error %+v", ex.Stdout[:min(len(ex.Stdout), 20)], ex.Stderr, ex.ExitCode, ex.Error)
		}
		// JSON text is valid UTF-8: invalid bytes become U+FFFD, a split
		// multi-byte character stays whole.
		ex2, err := c.Run(ctxFor(t, time.Minute), wire.RunCommandRequest{Command: `printf 'ok \377\376 end\n'; printf '\342\202'; sleep 0.1; printf '\254\n'`})
		if err != nil || !utf8.Valid(ex2.Stdout) || string(ex2.Stdout) != "ok \uFFFD\uFFFD end\n€\n" {
			t.Fatalf("invalid UTF-8 over SSE: %q %v", ex2.Stdout, err)
		}
		var rest []byte
		err = c.FollowLogs(ctxFor(t, time.Minute), ex.ID, 10, false, func(ev client.Event) error {
			if ev.Type == wire.EventStdout || ev.Type == wire.EventStderr {
				rest = append(rest, ev.Text...)
			}
			return nil
		})
		if err != nil || len(rest) != len(want)+len("err\n")-10 {
			t.Fatalf("replay from offset 10 over SSE: %d bytes (want %d), %v", len(rest), len(want)+4-10, err)
		}
	})

	t.Run("BadInput", func(t *testing.T) {
		tests := []struct {
			name, method, path, body string
			status                   int
			code                     sandbox.Code
		}{
			{"malformed JSON", "POST", "/command", `{"command":`, 400, sandbox.CodeInvalidRequest},
			{"wrong type", "POST", "/command", `{"command": 5}`, 400, sandbox.CodeInvalidRequest},
			{"missing command", "POST", "/command", `{"cwd":"/"}`, 400, sandbox.CodeInvalidRequest},
			{"empty body", "POST", "/command", ``, 400, sandbox.CodeInvalidRequest},
			{"trailing data", "POST", "/command", `{"command":"true"} {}`, 400, sandbox.CodeInvalidRequest},
			{"negative timeout", "POST", "/command", `{"command":"true","timeout":-1}`, 400, sandbox.CodeInvalidRequest},
			{"bad env name", "POST", "/command", `{"command":"true","envs":{"A=B":"x"}}`, 400, sandbox.CodeInvalidRequest},
			{"gid without uid", "POST", "/command", `{"command":"true","gid":0}`, 400, sandbox.CodeInvalidRequest},
			{"NUL in command", "POST", "/command", `{"command":"echo \u0000"}`, 400, sandbox.CodeInvalidRequest},
			{"unknown status id", "GET", "/command/status/cmd-nope", ``, 404, sandbox.CodeCommandNotFound},
			{"unknown logs id", "GET", "/command/cmd-nope/logs", ``, 404, sandbox.CodeCommandNotFound},
			{"interrupt without id", "DELETE", "/command", ``, 400, sandbox.CodeMissingQuery},
			{"interrupt unknown id", "DELETE", "/command?id=cmd-nope", ``, 404, sandbox.CodeCommandNotFound},
			{"bad cursor", "GET", "/command/cmd-nope/logs?cursor=-4", ``, 404, sandbox.CodeCommandNotFound},
			{"unknown route", "GET", "/no/such/route", ``, 404, sandbox.CodeNotFound},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				status, er, body := raw(t, b, tt.method, tt.path, "application/json", jsonReader(tt.body))
				if status != tt.status || er.Code != string(tt.code) || er.Message == "" {
					t.Fatalf("got %d %s", status, body)
				}
			})
		}
		ex := run(t, b, "true")
		status, er, _ := raw(t, b, http.MethodGet, "/command/"+ex.ID+"/logs?cursor=x", "", nil)
		if status != 400 || er.Code != string(sandbox.CodeInvalidRequest) {
			t.Fatalf("bad cursor: %d %+v", status, er)
		}
	})
}

// processGone reports whether the process whose pid is in pidFile has
// exited (a zombie not yet reaped by its new parent counts as gone).
func processGone(t testing.TB, b *Box, pidFile string) bool {
	ex := run(t, b, `s=$(cut -d' ' -f3 /proc/$(cat `+pidFile+`)/stat 2>/dev/null); [ -z "$s" ] || [ "$s" = Z ]`)
	return ex.ExitCode == 0
}

// waitFinished polls a command's status until it has finished.
func waitFinished(t testing.TB, b *Box, id string) wire.CommandStatus {
	t.Helper()
	var st wire.CommandStatus
	eventually(t, time.Minute, "command "+id+" to finish", func() bool {
		var err error
		st, err = b.Client.Status(ctxFor(t, time.Minute), id)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		return !st.Running
	})
	return st
}

func seqString(from, to int) string {
	var sb strings.Builder
	for i := from; i <= to; i++ {
		sb.WriteString(strconv.Itoa(i))
		sb.WriteByte('\n')
	}
	return sb.String()
}
