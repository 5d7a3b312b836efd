package execd

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/wait"
	"github.com/astrabox/astrabox/sandbox"
)

// startSessionServer serves an execd over httptest with the test's PATH
// and a temporary working directory; both close when the test ends.
func startSessionServer(t *testing.T, cfg Config) (*Server, *client.Client) {
	t.Helper()
	if cfg.WorkDir == "" {
		cfg.WorkDir = t.TempDir()
	}
	cfg.Env = append(cfg.Env, "PATH="+os.Getenv("PATH"), "HOME="+cfg.WorkDir, "LC_ALL=C.UTF-8")
	srv := New(cfg)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
	})
	return srv, client.New(hs.URL)
}

func sessionCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func needBash(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(defaultShell()); err != nil || !strings.Contains(defaultShell(), "bash") {
		t.Skip("bash is not installed")
	}
}

func TestSessionKeepsStateAcrossRuns(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	sub := t.TempDir()
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name, cmd, cwd string
		stdout, stderr string
		exit           int
	}{
		{"define", "cd " + sub + " && export GREETING=hi && N=3 && f() { echo fn-$1; }", "", "", "", 0},
		{"state kept", `echo "$PWD $GREETING $N"; f x`, "", sub + " hi 3\nfn-x\n", "", 0},
		{"streams apart", "echo out; echo err >&2", "", "out\n", "err\n", 0},
		{"no trailing newline", "printf abc; printf def >&2", "", "abc", "def", 0},
		{"cwd override", "pwd", "/", "/\n", "", 0},
		{"override was per run", "pwd", "", sub + "\n", "", 0},
		{"exit code", "false", "", "", "", 1},
		{"last status visible", "(exit 7); echo $?", "", "7\n", "", 0},
		{"previous run status is $?", "echo $?", "", "0\n", "", 0},
		{"syntax error", "if then", "", "", "*syntax error*", 2},
		{"stdin is empty", "cat; echo done", "", "done\n", "", 0},
		{"exec redirect is undone", "exec >/dev/null 2>&1; echo hidden", "", "", "", 0},
		{"output after exec redirect", "echo visible", "", "visible\n", "", 0},
		{"quotes", `echo 'a'"b"\'c`, "", "ab'c\n", "", 0},
		{"multi-line", "for i in 1 2; do\n  echo $i\ndone", "", "1\n2\n", "", 0},
		{"xtrace on", "set -x", "", "", "*", 0},
		{"xtrace shows no marker", "true", "", "", "*eval true*", 0},
		{"xtrace off", "set +x", "", "", "*", 0},
	}
	for _, st := range steps {
		ex, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: st.cmd, Cwd: st.cwd})
		if err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		if ex.ID != id || ex.ExitCode != st.exit || string(ex.Stdout) != st.stdout || !globMatch(st.stderr, string(ex.Stderr)) {
			t.Fatalf("%s: id=%s exit=%d stdout=%q stderr=%q, want exit %d stdout %q stderr %q",
				st.name, ex.ID, ex.ExitCode, ex.Stdout, ex.Stderr, st.exit, st.stdout, st.stderr)
		}
		if markerRE.Match(ex.Stdout) || markerRE.Match(ex.Stderr) {
			t.Fatalf("%s: a marker leaked: %q %q", st.name, ex.Stdout, ex.Stderr)
		}
		if (st.exit != 0) != (ex.Error != nil) || (ex.Error != nil && ex.Error.Name != wire.CommandErrName) {
			t.Fatalf("%s: error event %+v for exit %d", st.name, ex.Error, st.exit)
		}
	}
}

// markerRE matches a whole run marker (see newMarker).
var markerRE = regexp.MustCompile(`astrabox-[0-9a-f]{24}__`)

// globMatch matches s against a pattern whose only wildcard is a leading
// and/or trailing "*".
func globMatch(pattern, s string) bool {
	switch {
	case pattern == "*":
		return true
	case strings.HasPrefix(pattern, "*") && strings.HasSuffix(pattern, "*"):
		return strings.Contains(s, strings.Trim(pattern, "*"))
	}
	return pattern == s
}

func TestSessionErrors(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		call func() error
		code sandbox.Code
	}{
		{"run unknown", func() error {
			_, err := c.RunInSession(ctx, "session-nope", wire.RunInSessionRequest{Command: "true"})
			return err
		}, sandbox.CodeSessionNotFound},
		{"delete unknown", func() error { return c.DeleteSession(ctx, "session-nope") }, sandbox.CodeSessionNotFound},
		{"empty command", func() error {
			_, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: " "})
			return err
		}, sandbox.CodeInvalidRequest},
		{"negative timeout", func() error {
			_, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true", Timeout: -1})
			return err
		}, sandbox.CodeInvalidRequest},
		{"missing cwd", func() error {
			_, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true", Cwd: "/nonexistent-dir"})
			return err
		}, sandbox.CodeFileNotFound},
		{"create in missing dir", func() error {
			_, err := c.CreateSession(ctx, "/nonexistent-dir")
			return err
		}, sandbox.CodeFileNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := client.CodeOf(tt.call()); got != tt.code {
				t.Fatalf("code %q, want %q", got, tt.code)
			}
		})
	}
}

func TestSessionTimeoutKillsRunButKeepsShell(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "KEEP=yes"}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ex, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "echo before; sleep 30 | cat; echo after", Timeout: 300})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(start) > 20*time.Second || ex.Error == nil || !strings.Contains(strings.Join(ex.Error.Traceback, " "), "timed out") {
		t.Fatalf("timeout: took %s, error %+v", time.Since(start), ex.Error)
	}
	if !strings.HasPrefix(string(ex.Stdout), "before\n") {
		t.Fatalf("stdout %q", ex.Stdout)
	}
	ex, err = c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "echo $KEEP"})
	if err != nil || string(ex.Stdout) != "yes\n" || ex.ExitCode != 0 {
		t.Fatalf("after timeout: %+v %v", ex, err)
	}
}

func TestSessionBuiltinLoopTimeoutEndsSession(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "while :; do :; done", Timeout: 100})
	if err != nil || ex.Error == nil || !strings.Contains(ex.Error.Traceback[0], "session has ended") {
		t.Fatalf("run: %+v %v", ex, err)
	}
	_, err = c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true"})
	if client.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("run in ended session: %v", err)
	}
}

func TestSessionBusyAndDelete(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var ex *client.Execution
	var runErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ex = &client.Execution{ExitCode: -1}
		runErr = c.RunInSessionStream(ctx, id, wire.RunInSessionRequest{Command: "echo go; sleep 30"}, func(ev client.Event) error {
			if ev.Type == wire.EventStdout {
				close(started)
			}
			if ev.Type == wire.EventComplete && ev.ExitCode != nil {
				ex.ExitCode = *ev.ExitCode
			}
			return nil
		})
	}()
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the run never printed")
	}
	if _, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true"}); client.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("concurrent run: want CONFLICT, got %v", err)
	}
	if err := c.DeleteSession(ctx, id); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if runErr != nil || ex.ExitCode == 0 || ex.ExitCode == -1 {
		t.Fatalf("run in deleted session: exit %d, %v", ex.ExitCode, runErr)
	}
	if err := c.DeleteSession(ctx, id); client.CodeOf(err) != sandbox.CodeSessionNotFound {
		t.Fatalf("second delete: %v", err)
	}
}

func TestSessionExitEndsSession(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	ex, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "echo bye; exit 3"})
	if err != nil || ex.ExitCode != 3 || string(ex.Stdout) != "bye\n" {
		t.Fatalf("exit: %+v %v", ex, err)
	}
	if _, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "true"}); client.CodeOf(err) != sandbox.CodeConflict {
		t.Fatalf("run after exit: %v", err)
	}
}

func TestSessionDisconnectInterruptsRun(t *testing.T) {
	needBash(t)
	_, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	errStop := errors.New("stop")
	err = c.RunInSessionStream(runCtx, id, wire.RunInSessionRequest{Command: "echo go; sleep 30"}, func(ev client.Event) error {
		if ev.Type == wire.EventStdout {
			cancel()
			return errStop
		}
		return nil
	})
	cancel()
	if !errors.Is(err, errStop) {
		t.Fatalf("stream: %v", err)
	}
	var ex *client.Execution
	wait.Until(t, 30*time.Second, "the session to be free", func() bool {
		ex, err = c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "echo free"})
		return client.CodeOf(err) != sandbox.CodeConflict
	})
	if err != nil || string(ex.Stdout) != "free\n" {
		t.Fatalf("after disconnect: %+v %v", ex, err)
	}
}

func TestSessionCloseKills(t *testing.T) {
	needBash(t)
	srv, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	id, err := c.CreateSession(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	sh, err := srv.sessions.get(id)
	if err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(t.TempDir(), "pid")
	if _, err := c.RunInSession(ctx, id, wire.RunInSessionRequest{Command: "sleep 60 & echo $! >" + pidFile}); err != nil {
		t.Fatal(err)
	}
	srv.Close()
	if !closed(sh.exited) {
		t.Fatal("shell still running after Close")
	}
	b, _ := os.ReadFile(pidFile)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	wait.Until(t, 30*time.Second, "the background job to die", func() bool {
		_, alive := readProcStat(pid)
		return !alive
	})
}

func TestSessionShellQuote(t *testing.T) {
	needBash(t)
	tests := []string{`a'b`, `'`, `''`, `\'`, "x\ny", `$(echo no)`, "`echo no`", `"$HOME"`, `\`, "tab\there"}
	for _, s := range tests {
		out, err := exec.Command(defaultShell(), "-c", "printf %s "+shellQuote(s)).Output()
		if err != nil || string(out) != s {
			t.Errorf("shellQuote(%q) printed %q, %v", s, out, err)
		}
	}
}

func TestSessionParseProcStat(t *testing.T) {
	tests := []struct {
		in     string
		want   procEntry
		wantOK bool
	}{
		{"12 (bash) S 1 12 12 0", procEntry{12, 1, 12}, true},
		{"12 (a b) c) R 5 7 7", procEntry{12, 5, 7}, true},
		{"12 (zombie) Z 5 7 7", procEntry{}, false},
		{"12 (x) S", procEntry{}, false},
		{"garbage", procEntry{}, false},
		{"12 (x) S a b", procEntry{}, false},
	}
	for _, tt := range tests {
		got, ok := parseProcStat(12, tt.in)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("parseProcStat(%q) = %+v, %v; want %+v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestSessionMarkerSplitter(t *testing.T) {
	const marker = "__MARK__"
	tests := []struct {
		name    string
		pieces  []string
		out     string
		trailer string
		rest    string
		done    bool
	}{
		{"whole", []string{"hello__MARK__ 0\nlate"}, "hello", " 0", "late", true},
		{"split marker", []string{"hel", "lo__MA", "RK__ 1", "7\n"}, "hello", " 17", "", true},
		{"byte by byte", strings.Split("ab__MARK__ 3\nz", ""), "ab", " 3", "", true},
		{"false start", []string{"__MA", "X__MARK__\n"}, "__MAX", "", "", true},
		{"overlap", []string{"_", "__MARK__ 2\n"}, "_", " 2", "", true},
		{"no marker", []string{"abc_", "_M"}, "abc", "", "", false},
		{"long trailer", []string{"x__MARK__" + strings.Repeat("9", 70)}, "x", strings.Repeat("9", maxTrailer), "999999", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := markerSplitter{marker: []byte(marker)}
			var out bytes.Buffer
			var done bool
			var trailer, rest string
			for _, p := range tt.pieces {
				o, d, tr, r := m.feed([]byte(p))
				out.Write(o)
				if d {
					done, trailer, rest = true, tr, string(r)
					break
				}
			}
			if out.String() != tt.out || done != tt.done || trailer != tt.trailer || rest != tt.rest {
				t.Fatalf("out=%q done=%v trailer=%q rest=%q", out.String(), done, trailer, rest)
			}
		})
	}
}

// FuzzMarkerSplitter checks that, however a stream is cut into pieces, the
// splitter returns exactly the bytes before the first marker and the
// trailer after it, and never loses or invents bytes.
func FuzzMarkerSplitter(f *testing.F) {
	f.Add([]byte("hello"), []byte(" 0\nrest"), uint8(3), true)
	f.Add([]byte("__MA__M"), []byte("\n"), uint8(1), true)
	f.Add([]byte("no marker at all _"), []byte(""), uint8(7), false)
	f.Fuzz(func(t *testing.T, before, after []byte, cut uint8, withMarker bool) {
		marker := []byte("__M4rk__")
		if bytes.Contains(before, marker) {
			return
		}
		stream := bytes.Clone(before)
		if withMarker {
			stream = append(append(stream, marker...), after...)
		}
		step := int(cut%16) + 1
		m := markerSplitter{marker: marker}
		var out bytes.Buffer
		var done bool
		var trailer string
		var rest []byte
		for i := 0; i < len(stream) && !done; i += step {
			o, d, tr, r := m.feed(stream[i:min(i+step, len(stream))])
			out.Write(o)
			if d {
				done, trailer = true, tr
				rest = append(bytes.Clone(r), stream[min(i+step, len(stream)):]...)
			}
		}
		if !done {
			out.Write(m.flush())
		}
		if !bytes.Equal(out.Bytes(), before) {
			t.Fatalf("out %q, want %q", out.Bytes(), before)
		}
		nl := bytes.IndexByte(after, '\n')
		wantDone := withMarker && (nl >= 0 && nl <= maxTrailer || len(after) > maxTrailer)
		if done != wantDone {
			t.Fatalf("done=%v want %v (after %q)", done, wantDone, after)
		}
		if !done {
			return
		}
		var wantTrailer, wantRest []byte
		if nl >= 0 && nl <= maxTrailer {
			wantTrailer, wantRest = after[:nl], after[nl+1:]
		} else {
			wantTrailer, wantRest = after[:maxTrailer], after[maxTrailer:]
		}
		if trailer != string(wantTrailer) || !bytes.Equal(rest, wantRest) {
			t.Fatalf("trailer %q rest %q, want %q %q", trailer, rest, wantTrailer, wantRest)
		}
	})
}
