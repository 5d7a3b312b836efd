package execd_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/sandbox"
)

// startCommandServer serves an execd with cfg over httptest and returns a
// client for it; both are closed when the test ends.
func startCommandServer(t *testing.T, cfg execd.Config) (*execd.Server, *client.Client) {
	t.Helper()
	if cfg.WorkDir == "" {
		cfg.WorkDir = t.TempDir()
	}
	cfg.Env = append(cfg.Env, "PATH="+os.Getenv("PATH"))
	srv := execd.New(cfg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return srv, client.New(hs.URL, client.WithToken(cfg.AccessToken))
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestTooManyConcurrentCommands(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{MaxCommands: 1})
	ctx := testCtx(t)
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "sleep 30", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctx, wire.RunCommandRequest{Command: "true"})
	var ae *client.APIError
	if client.CodeOf(err) != sandbox.CodeTooManyRequests || !asAPIError(err, &ae) || ae.Status != http.StatusTooManyRequests {
		t.Fatalf("want 429 TOO_MANY_REQUESTS, got %v", err)
	}
	if err := c.Interrupt(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	if ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "true"}); err != nil || ex.ExitCode != 0 {
		t.Fatalf("after the slot freed: %+v %v", ex, err)
	}
}

func asAPIError(err error, target **client.APIError) bool {
	ae, ok := err.(*client.APIError)
	if ok {
		*target = ae
	}
	return ok
}

func TestRingReportsLostOutput(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{OutputLimit: 256 << 10})
	ctx := testCtx(t)
	// Background: nobody follows, so the ring keeps only the newest bytes.
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "head -c 2000000 /dev/zero | tr '\\0' a; echo; echo tail-marker", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, "command to finish", func() bool {
		st, err := c.Status(ctx, ex.ID)
		return err == nil && !st.Running
	})
	data, next, lost, err := c.Logs(ctx, ex.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if lost == 0 || int64(len(data))+lost != next || !strings.HasSuffix(string(data), "tail-marker\n") {
		t.Fatalf("len=%d lost=%d next=%d", len(data), lost, next)
	}
	var sawLost int64
	var got int
	err = c.FollowLogs(ctx, ex.ID, 0, true, func(ev client.Event) error {
		switch ev.Type {
		case wire.EventStatus:
			sawLost += ev.Lost
		case wire.EventStdout:
			got += len(ev.Text)
		}
		return nil
	})
	if err != nil || sawLost != lost || got != len(data) {
		t.Fatalf("follow: lost %d (want %d), got %d bytes (want %d), err %v", sawLost, lost, got, len(data), err)
	}
}

func TestFinishedRecordsAreFreed(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{Retention: 20 * time.Millisecond})
	ctx := testCtx(t)
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "echo hi"})
	if err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, "record to expire", func() bool {
		_, err := c.Status(ctx, ex.ID)
		return client.CodeOf(err) == sandbox.CodeCommandNotFound
	})
}

func TestAccessToken(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{AccessToken: "s3cret"})
	ctx := testCtx(t)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("with token: %v", err)
	}
	tests := []struct{ name, token string }{{"missing", ""}, {"wrong", "s3cret-not"}, {"prefix", "s3cre"}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bad := client.New(c.BaseURL(), client.WithToken(tt.token))
			if err := bad.Ping(ctx); client.CodeOf(err) != sandbox.CodeUnauthorized {
				t.Fatalf("want UNAUTHORIZED, got %v", err)
			}
		})
	}
}

func TestCloseKillsRunningCommands(t *testing.T) {
	srv, c := startCommandServer(t, execd.Config{})
	ctx := testCtx(t)
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "sleep 60", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
	st, err := c.Status(ctx, ex.ID)
	if err != nil || st.Running || st.ExitCode == nil || *st.ExitCode != 137 {
		t.Fatalf("after Close: %+v %v", st, err)
	}
	if _, err := c.Run(ctx, wire.RunCommandRequest{Command: "true"}); client.CodeOf(err) != sandbox.CodeUnavailable {
		t.Fatalf("run after Close: want UNAVAILABLE, got %v", err)
	}
}

func TestStreamEndsWhenADaemonKeepsThePipe(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{})
	ctx := testCtx(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	// The background sleep inherits stdout; the stream must still end when
	// the shell exits, not when the sleep does.
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "sleep 120 & echo $! > " + pidFile + "; echo started"})
	if err != nil || ex.ExitCode != 0 || string(ex.Stdout) != "started\n" {
		t.Fatalf("%+v %v", ex, err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if p, err := os.FindProcess(pid); err == nil {
		_ = p.Kill()
	}
}

// TestDaemonKeepsWritingAfterTheCommand: a server started in the
// background (`sh -c 'server &'`) keeps writing to the output it
// inherited after its command has finished; it must never get EPIPE (or
// die of SIGPIPE) for it.
func TestDaemonKeepsWritingAfterTheCommand(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{})
	ctx := testCtx(t)
	done := filepath.Join(t.TempDir(), "done")
	cmd := "(sleep 0.5; i=0; while [ $i -lt 200 ]; do echo line $i; echo err $i >&2; i=$((i+1)); done; echo survived > " + done + ") & echo started"
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: cmd})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("%+v %v", ex, err)
	}
	wait.Until(t, 30*time.Second, "the daemon to write after its command ended", func() bool {
		b, _ := os.ReadFile(done)
		return string(b) == "survived\n"
	})
}

func TestUnknownRouteAndMethod(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{})
	resp, err := http.Get(c.BaseURL() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("got %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}

// TestOutputIsBoundedInTotal: many background commands that each stay
// within the per-stream limit are still bounded together by OutputTotal;
// the oldest finished ones lose their output first, and each command's
// status says how much it lost.
func TestOutputIsBoundedInTotal(t *testing.T) {
	const total = 8 << 20
	_, c := startCommandServer(t, execd.Config{OutputLimit: 4 << 20, OutputTotal: total})
	ctx := testCtx(t)
	var ids []string
	for range 10 {
		ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "head -c 3000000 /dev/zero | tr '\\0' x", Background: true})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ex.ID)
		// One at a time, so the order in which they finish is known.
		for {
			st, err := c.Status(ctx, ex.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !st.Running {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var retained int64
	var statuses []wire.CommandStatus
	for _, id := range ids {
		st, err := c.Status(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if st.OutputBytes != 3000000 {
			t.Fatalf("%s: output_bytes %d", id, st.OutputBytes)
		}
		retained += st.OutputBytes - st.OutputDropped
		statuses = append(statuses, st)
	}
	if retained > total {
		t.Fatalf("the commands retain %d bytes together, over the total of %d", retained, total)
	}
	if statuses[0].OutputDropped != 3000000 || statuses[len(statuses)-1].OutputDropped != 0 {
		t.Fatalf("the oldest lost %d, the newest %d; want the oldest's output gone first", statuses[0].OutputDropped, statuses[len(statuses)-1].OutputDropped)
	}
}

// TestPrivateStdio: a command started with private stdio reads its stdin
// and writes its output as through pipes, but no other process can open
// them again through /proc/<pid>/fd to write into them.
func TestPrivateStdio(t *testing.T) {
	_, c := startCommandServer(t, execd.Config{})
	ctx := testCtx(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "pid")
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "echo $$ > " + pidFile + "; while read -r line; do echo \"got $line\"; echo \"err $line\" >&2; done",
		Background: true, Stdin: true, PrivateStdio: true})
	if err != nil {
		t.Fatal(err)
	}
	var pid string
	wait.Until(t, 30*time.Second, "the command's pid", func() bool {
		b, _ := os.ReadFile(pidFile)
		pid = strings.TrimSpace(string(b))
		return pid != ""
	})
	for _, fd := range []string{"0", "1", "2"} {
		f, err := os.OpenFile("/proc/"+pid+"/fd/"+fd, os.O_WRONLY, 0)
		if err == nil {
			_, _ = f.WriteString("forged\n")
			f.Close()
			t.Errorf("fd %s of the command opened through /proc", fd)
		}
	}
	if err := c.WriteStdin(ctx, ex.ID, strings.NewReader("hello\n"), true); err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, "the command to end", func() bool {
		st, err := c.Status(ctx, ex.ID)
		return err == nil && !st.Running
	})
	out, _, _, err := c.Logs(ctx, ex.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(out); !strings.Contains(got, "got hello\n") || !strings.Contains(got, "err hello\n") || strings.Contains(got, "forged") {
		t.Fatalf("output %q", got)
	}
}
