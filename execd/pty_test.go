package execd_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd"
	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// ptyServer serves an execd with cfg (and an access token) over httptest.
// The server, the listener and the client's idle connections are closed
// when the test ends.
func ptyServer(t *testing.T, cfg execd.Config) (*execd.Server, *client.Client) {
	t.Helper()
	if cfg.WorkDir == "" {
		cfg.WorkDir = t.TempDir()
	}
	cfg.AccessToken = "pty-test-token"
	cfg.Env = append(cfg.Env, "PATH="+os.Getenv("PATH"), "HOME="+cfg.WorkDir)
	srv := execd.New(cfg)
	hs := httptest.NewServer(srv.Handler())
	c := client.New(hs.URL, client.WithToken(cfg.AccessToken))
	t.Cleanup(func() {
		srv.Close()
		hs.Close()
		c.HTTPClient().CloseIdleConnections()
	})
	return srv, c
}

func ptyCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// ptyReader collects what a PTYConn receives.
type ptyReader struct {
	pc        *client.PTYConn
	all       bytes.Buffer // output of every channel, replay included
	stdout    bytes.Buffer
	stderr    bytes.Buffer
	replay    []client.PTYFrame
	connected *wire.PTYFrame
	exit      *int
	controls  []wire.PTYFrame
	err       error // the error that ended reading
}

// until reads frames until cond holds, and fails the test if the
// connection ends or ctx expires first.
func (r *ptyReader) until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if r.err != nil {
			t.Fatalf("waiting for %s: connection ended: %v; output so far %q", what, r.err, r.all.String())
		}
		r.next(ctx)
	}
}

// next reads one frame into r; a read error is kept in r.err.
func (r *ptyReader) next(ctx context.Context) {
	f, err := r.pc.Next(ctx)
	if err != nil {
		r.err = err
		return
	}
	if f.Control != nil {
		r.controls = append(r.controls, *f.Control)
		switch f.Control.Type {
		case wire.PTYFrameConnected:
			r.connected = f.Control
		case wire.PTYFrameExit:
			r.exit = f.Control.ExitCode
		}
		return
	}
	r.all.Write(f.Data)
	switch f.Channel {
	case wire.PTYStdout:
		r.stdout.Write(f.Data)
	case wire.PTYStderr:
		r.stderr.Write(f.Data)
	case wire.PTYReplay:
		r.replay = append(r.replay, f)
	}
}

// drain reads until the connection ends and returns the error that ended it.
func (r *ptyReader) drain(ctx context.Context) error {
	for r.err == nil {
		r.next(ctx)
	}
	return r.err
}

func (r *ptyReader) waitFor(t *testing.T, ctx context.Context, marker string) {
	t.Helper()
	r.until(t, ctx, strconv.Quote(marker), func() bool { return strings.Contains(r.all.String(), marker) })
}

func (r *ptyReader) send(t *testing.T, s string) {
	t.Helper()
	if _, err := r.pc.Write([]byte(s)); err != nil {
		t.Fatal(err)
	}
}

// ptyAttach attaches, retrying while a client that just closed still holds
// the session.
func ptyAttach(t *testing.T, ctx context.Context, c *client.Client, id string, opts client.AttachOptions) *ptyReader {
	t.Helper()
	for {
		pc, err := c.AttachPTY(ctx, id, opts)
		if err == nil {
			t.Cleanup(func() { pc.Close() })
			return &ptyReader{pc: pc}
		}
		if client.CodeOf(err) != sandbox.CodeConflict || ctx.Err() != nil {
			t.Fatalf("attach %s: %v", id, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptyCreate(t *testing.T, ctx context.Context, c *client.Client, req wire.CreatePTYRequest) string {
	t.Helper()
	id, err := c.CreatePTY(ctx, req)
	if err != nil {
		t.Fatalf("create pty: %v", err)
	}
	return id
}

func TestPTYEchoAndStatus(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{Envs: map[string]string{"PTY_GREETING": "hi"}})
	st, err := c.PTYStatus(ctx, id)
	if err != nil || st.Running || st.Attached || st.OutputOffset != 0 || st.SessionID != id {
		t.Fatalf("status before attach: %+v, %v", st, err)
	}
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
	r.until(t, ctx, "connected", func() bool { return r.connected != nil })
	if r.connected.Mode != wire.PTYModePTY || r.connected.SessionID != id {
		t.Fatalf("connected frame %+v", r.connected)
	}
	// The terminal echoes the typed line; only the output has "mk-42".
	r.send(t, `echo "mk-$((40+2)) $PTY_GREETING $TERM"`+"\r")
	r.waitFor(t, ctx, "mk-42 hi xterm-256color")
	st, err = c.PTYStatus(ctx, id)
	if err != nil || !st.Running || !st.Attached || st.OutputOffset < r.pc.Offset() || st.ExitCode != nil {
		t.Fatalf("status while attached: %+v (client offset %d), %v", st, r.pc.Offset(), err)
	}
	if err := r.pc.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	r.until(t, ctx, "pong", func() bool {
		return len(r.controls) > 0 && r.controls[len(r.controls)-1].Type == wire.PTYFramePong
	})
}

func TestPTYReplayOffsets(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
	r.send(t, `echo "first-$((1+1))"`+"\r")
	r.waitFor(t, ctx, "first-2")
	r.pc.Close()

	st, err := c.PTYStatus(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	r2 := ptyAttach(t, ctx, c, id, client.AttachOptions{Since: &zero})
	r2.until(t, ctx, "connected", func() bool { return r2.connected != nil })
	if len(r2.replay) == 0 || r2.replay[0].Offset != 0 {
		t.Fatalf("replay frames %+v", r2.replay)
	}
	next := int64(0)
	for _, f := range r2.replay {
		if f.Offset != next {
			t.Fatalf("replay frame at %d, want %d", f.Offset, next)
		}
		next += int64(len(f.Data))
	}
	// The shell may print its prompt between the status and the re-attach:
	// the replay covers at least what the status saw, and live output
	// starts exactly where the replay ends.
	if next < st.OutputOffset || r2.connected.Offset != next {
		t.Fatalf("replay ends at %d, connected offset %d, status offset %d", next, r2.connected.Offset, st.OutputOffset)
	}
	full := r2.all.String()
	if !strings.Contains(full, "first-2") {
		t.Fatalf("replay %q lacks earlier output", full)
	}

	// A replay from the middle is the matching suffix (and whatever the
	// shell printed since, such as its next prompt), ending where live
	// output starts.
	k := int64(strings.Index(full, "first-2"))
	r2.pc.Close()
	r3 := ptyAttach(t, ctx, c, id, client.AttachOptions{Since: &k})
	r3.until(t, ctx, "connected", func() bool { return r3.connected != nil })
	var replayed strings.Builder
	for _, f := range r3.replay {
		replayed.Write(f.Data)
	}
	if len(r3.replay) == 0 || r3.replay[0].Offset != k || !strings.HasPrefix(replayed.String(), full[k:]) ||
		r3.connected.Offset != k+int64(replayed.Len()) {
		t.Fatalf("replay from %d: frames %+v, data %q, want %q first", k, r3.replay, replayed.String(), full[k:])
	}
	// Live output continues at the tracked offset.
	r3.send(t, `echo "second-$((2+2))"`+"\r")
	r3.waitFor(t, ctx, "second-4")
	st, err = c.PTYStatus(ctx, id)
	if err != nil || st.OutputOffset < r3.pc.Offset() {
		t.Fatalf("status %+v, client offset %d, %v", st, r3.pc.Offset(), err)
	}
	end := r3.pc.Offset()
	r3.pc.Close()
	r4 := ptyAttach(t, ctx, c, id, client.AttachOptions{Since: &end})
	r4.until(t, ctx, "connected", func() bool { return r4.connected != nil })
	if strings.Contains(r4.all.String(), "second-4") {
		t.Fatalf("replay from %d repeats output already seen: %q", end, r4.all.String())
	}
}

// TestPTYOutputWithoutClient checks that a program writing more than the
// replay buffer holds runs to completion with no client attached, and that
// the replay keeps its tail with consistent offsets.
func TestPTYOutputWithoutClient(t *testing.T) {
	const limit = 256 << 10
	_, c := ptyServer(t, execd.Config{PTYReplayBytes: limit})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{Command: `head -c 2000000 /dev/zero | tr '\0' x; echo; echo "done-$((3+4))"`})
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{Pipe: true})
	r.pc.Close()
	var st wire.PTYStatus
	ptyPoll(t, "the command to finish", func() bool {
		var err error
		st, err = c.PTYStatus(ctx, id)
		return err == nil && !st.Running
	})
	if st.ExitCode == nil || *st.ExitCode != 0 || st.OutputOffset < 2000000 {
		t.Fatalf("status %+v", st)
	}
	zero := int64(0)
	r2 := ptyAttach(t, ctx, c, id, client.AttachOptions{Since: &zero})
	if err := r2.drain(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("attach to a finished session ended with %v", err)
	}
	if r2.exit == nil || *r2.exit != 0 || r2.connected == nil || r2.connected.Offset != st.OutputOffset {
		t.Fatalf("exit %v, connected %+v, status %+v", r2.exit, r2.connected, st)
	}
	if len(r2.replay) == 0 || r2.replay[0].Offset == 0 {
		t.Fatalf("replay should start after dropped bytes; frames: %d", len(r2.replay))
	}
	last := r2.replay[len(r2.replay)-1]
	if last.Offset+int64(len(last.Data)) != st.OutputOffset || r2.all.Len() > 2*limit {
		t.Fatalf("replay of %d bytes ends at %d, status offset %d", r2.all.Len(), last.Offset+int64(len(last.Data)), st.OutputOffset)
	}
	if !strings.HasSuffix(r2.all.String(), "done-7\n") {
		t.Fatalf("replay tail %q", r2.all.String()[max(0, r2.all.Len()-40):])
	}
}

func TestPTYConflictAndTakeover(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	first := ptyAttach(t, ctx, c, id, client.AttachOptions{})
	first.until(t, ctx, "connected", func() bool { return first.connected != nil })

	_, err := c.AttachPTY(ctx, id, client.AttachOptions{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Code != sandbox.CodeConflict {
		t.Fatalf("second attach: want 409 CONFLICT, got %v", err)
	}
	second := ptyAttach(t, ctx, c, id, client.AttachOptions{Takeover: true})
	err = first.drain(ctx)
	var ce *client.PTYClosedError
	if !errors.Is(err, client.ErrPTYTakenOver) || !errors.As(err, &ce) || ce.Reason != wire.PTYErrTakenOver {
		t.Fatalf("evicted client: want close 4001 TAKEN_OVER, got %v", err)
	}
	second.send(t, `echo "taken-$((5+5))"`+"\r")
	second.waitFor(t, ctx, "taken-10")
}

func TestPTYResizeSignalExit(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{Cols: 91, Rows: 27})
	r.send(t, "stty size\r")
	r.waitFor(t, ctx, "27 91")
	if err := r.pc.Resize(ctx, 132, 43); err != nil {
		t.Fatal(err)
	}
	r.send(t, "stty size\r")
	r.waitFor(t, ctx, "43 132")

	// The job prints its marker itself, so it is the foreground job when
	// the marker arrives.
	r.send(t, `sh -c 'echo "sleeping-$((6*7))"; exec sleep 30'`+"\r")
	r.waitFor(t, ctx, "sleeping-42")
	if err := r.pc.Signal(ctx, "SIGINT"); err != nil {
		t.Fatal(err)
	}
	r.send(t, `echo "rc=$?"`+"\r")
	r.waitFor(t, ctx, "rc=130")

	r.send(t, "exit 7\r")
	if err := r.drain(ctx); !errors.Is(err, io.EOF) {
		t.Fatalf("after exit: %v", err)
	}
	if r.exit == nil || *r.exit != 7 {
		t.Fatalf("exit frame code %v, want 7", r.exit)
	}
	st, err := c.PTYStatus(ctx, id)
	if err != nil || st.Running || st.ExitCode == nil || *st.ExitCode != 7 {
		t.Fatalf("status after exit: %+v, %v", st, err)
	}
}

func TestPTYPipeMode(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{Pipe: true})
	r.until(t, ctx, "connected", func() bool { return r.connected != nil })
	if r.connected.Mode != wire.PTYModePipe {
		t.Fatalf("mode %q", r.connected.Mode)
	}
	r.send(t, "echo out-$((1+1)); echo err-$((2+2)) >&2\n")
	r.until(t, ctx, "both streams", func() bool {
		return strings.Contains(r.stdout.String(), "out-2") && strings.Contains(r.stderr.String(), "err-4")
	})
	if strings.Contains(r.stdout.String(), "err-4") || strings.Contains(r.stderr.String(), "out-2") {
		t.Fatalf("streams mixed: stdout %q stderr %q", r.stdout.String(), r.stderr.String())
	}
	r.send(t, "exit 3\n")
	if err := r.drain(ctx); !errors.Is(err, io.EOF) || r.exit == nil || *r.exit != 3 {
		t.Fatalf("pipe exit: %v, code %v", err, r.exit)
	}
}

var ptyPIDLine = regexp.MustCompile(`pid:(\d+):(\d+):end`)

func TestPTYDeleteKillsProcesses(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
	// A background job has a process group of its own.
	r.send(t, "sleep 1000 & echo \"pid:$$:$!:end\"\r")
	r.until(t, ctx, "pids", func() bool { return ptyPIDLine.MatchString(r.all.String()) })
	m := ptyPIDLine.FindStringSubmatch(r.all.String())
	if err := c.DeletePTY(ctx, id); err != nil {
		t.Fatal(err)
	}
	for _, s := range m[1:] {
		pid, _ := strconv.Atoi(s)
		ptyPoll(t, "process "+s+" to be gone", func() bool { return !ptyAlive(pid) })
	}
	if err := r.drain(ctx); !errors.Is(err, io.EOF) || r.exit == nil || *r.exit != 128+int(syscall.SIGKILL) {
		t.Fatalf("attached client after delete: %v, exit %v", err, r.exit)
	}
	if _, err := c.PTYStatus(ctx, id); client.CodeOf(err) != sandbox.CodeSessionNotFound {
		t.Fatalf("status after delete: %v", err)
	}
}

func TestPTYErrors(t *testing.T) {
	_, c := ptyServer(t, execd.Config{})
	ctx := ptyCtx(t)
	for name, err := range map[string]error{
		"status": func() error { _, err := c.PTYStatus(ctx, "nope"); return err }(),
		"delete": c.DeletePTY(ctx, "nope"),
		"attach": func() error { _, err := c.AttachPTY(ctx, "nope", client.AttachOptions{}); return err }(),
	} {
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Code != sandbox.CodeSessionNotFound {
			t.Errorf("%s of unknown session: %v", name, err)
		}
	}
	for _, tc := range []struct {
		req  wire.CreatePTYRequest
		code sandbox.Code
	}{
		{wire.CreatePTYRequest{Cwd: "does/not/exist"}, sandbox.CodeFileNotFound},
		{wire.CreatePTYRequest{Envs: map[string]string{"BAD=NAME": "x"}}, sandbox.CodeInvalidRequest},
		{wire.CreatePTYRequest{Command: "echo \x00"}, sandbox.CodeInvalidRequest},
	} {
		_, err := c.CreatePTY(ctx, tc.req)
		if client.CodeOf(err) != tc.code {
			t.Errorf("create %+v: want %s, got %v", tc.req, tc.code, err)
		}
	}
	id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
	bad := int64(-1)
	if _, err := c.AttachPTY(ctx, id, client.AttachOptions{Since: &bad}); client.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Errorf("since=-1: %v", err)
	}
	r := ptyAttach(t, ctx, c, id, client.AttachOptions{Pipe: true})
	if err := r.pc.Signal(ctx, "SIGNOPE"); err != nil {
		t.Fatal(err)
	}
	r.until(t, ctx, "an error frame", func() bool {
		n := len(r.controls)
		return n > 0 && r.controls[n-1].Type == wire.PTYFrameError && r.controls[n-1].Code == wire.PTYErrInvalidFrame
	})
}

// TestPTYCloseLeaksNothing checks that Server.Close kills every session
// and that no goroutine or descriptor outlives the server.
func TestPTYCloseLeaksNothing(t *testing.T) {
	ctx := ptyCtx(t)
	baseG, baseFD := runtime.NumGoroutine(), ptyFDs(t)

	cfg := execd.Config{WorkDir: t.TempDir(), AccessToken: "tok"}
	cfg.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + cfg.WorkDir}
	srv := execd.New(cfg)
	hs := httptest.NewServer(srv.Handler())
	c := client.New(hs.URL, client.WithToken("tok"))
	var readers []*ptyReader
	for _, pipe := range []bool{false, true} {
		id := ptyCreate(t, ctx, c, wire.CreatePTYRequest{})
		pc, err := c.AttachPTY(ctx, id, client.AttachOptions{Pipe: pipe})
		if err != nil {
			t.Fatal(err)
		}
		r := &ptyReader{pc: pc}
		r.send(t, "echo \"up-$((8+8))\"\n")
		r.waitFor(t, ctx, "up-16")
		readers = append(readers, r)
	}
	ptyCreate(t, ctx, c, wire.CreatePTYRequest{}) // never started
	srv.Close()
	for _, r := range readers {
		if err := r.drain(ctx); !errors.Is(err, io.EOF) || r.exit == nil {
			t.Fatalf("client of a closed server: %v, exit %v", err, r.exit)
		}
		r.pc.Close()
	}
	if _, err := c.CreatePTY(ctx, wire.CreatePTYRequest{}); client.CodeOf(err) != sandbox.CodeUnavailable {
		t.Fatalf("create after close: %v", err)
	}
	hs.Close()
	c.HTTPClient().CloseIdleConnections()
	ptyPoll(t, "goroutines and descriptors to be released", func() bool {
		return runtime.NumGoroutine() <= baseG && ptyFDs(t) <= baseFD
	})
}

// ptyPoll polls cond until it holds, failing after 10 s.
func ptyPoll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.Stack(buf, true)
			t.Fatalf("timed out waiting for %s; goroutines:\n%s", what, buf[:n])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func ptyFDs(t *testing.T) int {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count descriptors: %v", err)
	}
	return len(entries)
}

// ptyAlive reports whether pid is a live (not zombie) process.
func ptyAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}
