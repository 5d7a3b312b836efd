package sandboxtest

import (
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// wantErrCode fails unless err is an execd error with code.
func wantErrCode(t testing.TB, what string, err error, code sandbox.Code) {
	t.Helper()
	if got := client.CodeOf(err); got != code {
		t.Fatalf("%s: want error code %s, got %v", what, code, err)
	}
}

func testSessions(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)
	ctx := ctxFor(t, 3*time.Minute)
	id, err := b.Client.CreateSession(ctx, "")
	if err != nil {
		t.Fatalf("create session: %v", err)
	}
	runIn := func(t *testing.T, req wire.RunInSessionRequest) *client.Execution {
		t.Helper()
		ex, err := b.Client.RunInSession(ctx, id, req)
		if err != nil {
			t.Fatalf("run %q: %v", req.Command, err)
		}
		return ex
	}

	t.Run("KeepsCwdAndVariables", func(t *testing.T) {
		runIn(t, wire.RunInSessionRequest{Command: "mkdir -p sess-dir && cd sess-dir && export SESS_VAR=kept && sess_fn() { echo fn:$1; }"})
		ex := runIn(t, wire.RunInSessionRequest{Command: `echo "$(basename "$PWD") $SESS_VAR"; sess_fn ok; sh -c 'echo child:$SESS_VAR'`})
		if got, want := string(ex.Stdout), "sess-dir kept\nfn:ok\nchild:kept\n"; got != want || ex.ExitCode != 0 {
			t.Fatalf("stdout %q exit %d, want %q 0", got, ex.ExitCode, want)
		}
	})

	t.Run("CwdOverrideIsPerRun", func(t *testing.T) {
		ex := runIn(t, wire.RunInSessionRequest{Command: "pwd", Cwd: "/"})
		if string(ex.Stdout) != "/\n" {
			t.Fatalf("with cwd /: %q", ex.Stdout)
		}
		ex = runIn(t, wire.RunInSessionRequest{Command: "basename \"$PWD\""})
		if string(ex.Stdout) != "sess-dir\n" {
			t.Fatalf("after the override: %q", ex.Stdout)
		}
	})

	t.Run("ExitCode", func(t *testing.T) {
		ex := runIn(t, wire.RunInSessionRequest{Command: "sh -c 'exit 3'"})
		if ex.ExitCode != 3 || ex.Error == nil || ex.Error.Name != wire.CommandErrName || ex.Error.Value != "3" {
			t.Fatalf("exit %d, error %+v; want 3 and a %s", ex.ExitCode, ex.Error, wire.CommandErrName)
		}
		ex = runIn(t, wire.RunInSessionRequest{Command: "true"})
		if ex.ExitCode != 0 || ex.Error != nil {
			t.Fatalf("true: exit %d, error %+v", ex.ExitCode, ex.Error)
		}
	})

	t.Run("StdoutStderrSeparate", func(t *testing.T) {
		ex := runIn(t, wire.RunInSessionRequest{Command: "echo out1; echo err1 >&2; printf out2; printf err2 >&2"})
		if string(ex.Stdout) != "out1\nout2" || string(ex.Stderr) != "err1\nerr2" {
			t.Fatalf("stdout %q stderr %q", ex.Stdout, ex.Stderr)
		}
	})

	t.Run("TimeoutKillsRunNotSession", func(t *testing.T) {
		start := time.Now()
		ex := runIn(t, wire.RunInSessionRequest{Command: "echo started; sleep 60", Timeout: 500})
		if took := time.Since(start); took > 30*time.Second {
			t.Fatalf("the timed-out run took %s", took)
		}
		if ex.ExitCode == 0 || ex.Error == nil || !strings.Contains(strings.Join(ex.Error.Traceback, " "), "timed out") {
			t.Fatalf("timed-out run: exit %d, error %+v", ex.ExitCode, ex.Error)
		}
		if string(ex.Stdout) != "started\n" {
			t.Fatalf("stdout %q", ex.Stdout)
		}
		ex = runIn(t, wire.RunInSessionRequest{Command: `echo "$SESS_VAR"`})
		if string(ex.Stdout) != "kept\n" || ex.ExitCode != 0 {
			t.Fatalf("after the timeout: stdout %q exit %d", ex.Stdout, ex.ExitCode)
		}
	})

	t.Run("UnknownSession", func(t *testing.T) {
		_, err := b.Client.RunInSession(ctx, "session-unknown", wire.RunInSessionRequest{Command: "true"})
		wantErrCode(t, "run", err, sandbox.CodeSessionNotFound)
		wantErrCode(t, "delete", b.Client.DeleteSession(ctx, "session-unknown"), sandbox.CodeSessionNotFound)
	})

	t.Run("Delete", func(t *testing.T) {
		if err := b.Client.DeleteSession(ctx, id); err != nil {
			t.Fatal(err)
		}
		_, err := b.Client.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true"})
		wantErrCode(t, "run after delete", err, sandbox.CodeSessionNotFound)
	})
}
