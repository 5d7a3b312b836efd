package sandboxtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// testPTY drives terminal sessions over WebSocket. A PTY echoes what is
// typed, so every marker is computed by the shell ($((...))) and only its
// output matches.
func testPTY(t *testing.T, h Harness) {
	b := NewBox(t, h, nil)
	c := b.Client

	t.Run("Echo", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		mk := ptyMarker()
		r.send(t, fmt.Sprintf(`echo "%s-$((40+2))"`+"\r", mk))
		r.waitFor(t, ctx, mk+"-42")
		if r.connected == nil || r.connected.Mode != wire.PTYModePTY {
			t.Fatalf("connected frame %+v", r.connected)
		}
		st, err := c.PTYStatus(ctx, id)
		if err != nil || !st.Running || !st.Attached || st.OutputOffset < r.pc.Offset() {
			t.Fatalf("status %+v (client at offset %d): %v", st, r.pc.Offset(), err)
		}
	})

	t.Run("ReplayAfterReconnect", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		mk := ptyMarker()
		r.send(t, fmt.Sprintf(`echo "%s-$((1+1))"`+"\r", mk))
		r.waitFor(t, ctx, mk+"-2")
		seen := r.pc.Offset()
		r.pc.Close()

		st, err := c.PTYStatus(ctx, id)
		if err != nil || st.OutputOffset < seen {
			t.Fatalf("status %+v after reading to %d: %v", st, seen, err)
		}
		zero := int64(0)
		r2 := ptyAttach(t, ctx, c, id, client.AttachOptions{Since: &zero})
		r2.until(t, ctx, "the connected frame", func() bool { return r2.connected != nil })
		next := int64(0)
		for _, f := range r2.replay {
			if f.Offset != next {
				t.Fatalf("replay frame at offset %d, want %d", f.Offset, next)
			}
			next += int64(len(f.Data))
		}
		// The shell may print (its prompt) between the status and the
		// re-attach: the replay covers at least what the status saw, and
		// live output starts exactly where the replay ends.
		if next < st.OutputOffset || r2.connected.Offset != next {
			t.Fatalf("replay ends at %d, live starts at %d, status offset %d", next, r2.connected.Offset, st.OutputOffset)
		}
		if !strings.Contains(r2.all.String(), mk+"-2") {
			t.Fatalf("replay %q lacks the earlier output", r2.all.String())
		}
		// Live output carries on from there.
		r2.send(t, fmt.Sprintf(`echo "%s-$((2+3))"`+"\r", mk))
		r2.waitFor(t, ctx, mk+"-5")
	})

	t.Run("SecondAttachConflicts", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		r.until(t, ctx, "the connected frame", func() bool { return r.connected != nil })
		_, err := c.AttachPTY(ctx, id, client.AttachOptions{})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != http.StatusConflict {
			t.Fatalf("second attach: want HTTP 409, got %v", err)
		}
	})

	t.Run("Takeover", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		first := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		first.until(t, ctx, "the connected frame", func() bool { return first.connected != nil })
		second := ptyAttach(t, ctx, c, id, client.AttachOptions{Takeover: true})
		var ce *client.PTYClosedError
		if err := first.drain(ctx); !errors.As(err, &ce) || ce.Code != wire.PTYCloseTakenOver {
			t.Fatalf("evicted client: want close code %d, got %v", wire.PTYCloseTakenOver, err)
		}
		mk := ptyMarker()
		second.send(t, fmt.Sprintf(`echo "%s-$((3*3))"`+"\r", mk))
		second.waitFor(t, ctx, mk+"-9")
	})

	t.Run("Resize", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{Cols: 91, Rows: 27})
		r.send(t, "stty size\r")
		r.waitFor(t, ctx, "27 91")
		if err := r.pc.Resize(ctx, 132, 43); err != nil {
			t.Fatal(err)
		}
		r.send(t, "stty size\r")
		r.waitFor(t, ctx, "43 132")
	})

	t.Run("SignalInterruptsForegroundJob", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		mk := ptyMarker()
		// The job prints the marker itself: once it is seen, the job is the
		// terminal's foreground process group.
		r.send(t, fmt.Sprintf(`sh -c 'echo "%s-$((6*7))"; exec sleep 30'`+"\r", mk))
		r.waitFor(t, ctx, mk+"-42")
		if err := r.pc.Signal(ctx, "SIGINT"); err != nil {
			t.Fatal(err)
		}
		// The shell survives and reports the job's death by SIGINT.
		r.send(t, fmt.Sprintf(`echo "%s-rc-$?"`+"\r", mk))
		r.waitFor(t, ctx, mk+"-rc-130")
	})

	t.Run("ExitCode", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		r.send(t, "exit 7\r")
		if err := r.drain(ctx); !errors.Is(err, io.EOF) {
			t.Fatalf("after exit: want a normal close, got %v", err)
		}
		if r.exit == nil || *r.exit != 7 {
			t.Fatalf("exit frame code %v, want 7", r.exit)
		}
		st, err := c.PTYStatus(ctx, id)
		if err != nil || st.Running || st.ExitCode == nil || *st.ExitCode != 7 {
			t.Fatalf("status after exit: %+v, %v", st, err)
		}
	})

	t.Run("PipeModeKeepsStderrApart", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{Pipe: true})
		mk := ptyMarker()
		r.send(t, fmt.Sprintf("echo %s-out; echo %s-err >&2\n", mk, mk))
		r.until(t, ctx, "output on both channels", func() bool {
			return strings.Contains(r.stdout.String(), mk+"-out") && strings.Contains(r.stderr.String(), mk+"-err")
		})
		if strings.Contains(r.stdout.String(), mk+"-err") || strings.Contains(r.stderr.String(), mk+"-out") {
			t.Fatalf("channels mixed: stdout %q, stderr %q", r.stdout.String(), r.stderr.String())
		}
		if r.connected == nil || r.connected.Mode != wire.PTYModePipe {
			t.Fatalf("connected frame %+v", r.connected)
		}
	})

	t.Run("DeleteKillsProcesses", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		id := ptyCreate(t, ctx, c)
		r := ptyAttach(t, ctx, c, id, client.AttachOptions{})
		// A background job runs in a process group of its own.
		r.send(t, "sleep 1000 & echo \"pids:$$:$!:end\"\r")
		pids := regexp.MustCompile(`pids:(\d+):(\d+):end`)
		r.until(t, ctx, "the pids", func() bool { return pids.MatchString(r.all.String()) })
		m := pids.FindStringSubmatch(r.all.String())
		for _, pid := range m[1:] {
			if !ptyProcessAlive(t, b, pid) {
				t.Fatalf("process %s is not running before delete", pid)
			}
		}
		if err := c.DeletePTY(ctx, id); err != nil {
			t.Fatal(err)
		}
		for _, pid := range m[1:] {
			eventually(t, 30*time.Second, "process "+pid+" to be gone", func() bool { return !ptyProcessAlive(t, b, pid) })
		}
		if _, err := c.PTYStatus(ctx, id); client.CodeOf(err) != sandbox.CodeSessionNotFound {
			t.Fatalf("status after delete: want %s, got %v", sandbox.CodeSessionNotFound, err)
		}
	})

	t.Run("UnknownSession", func(t *testing.T) {
		ctx := ctxFor(t, time.Minute)
		_, err := c.PTYStatus(ctx, "pty-unknown")
		wantCode(t, err, sandbox.CodeSessionNotFound)
		wantCode(t, c.DeletePTY(ctx, "pty-unknown"), sandbox.CodeSessionNotFound)
		_, err = c.AttachPTY(ctx, "pty-unknown", client.AttachOptions{})
		wantCode(t, err, sandbox.CodeSessionNotFound)
	})
}

// ptyMarker is a unique word for one test's output.
func ptyMarker() string { return "mk" + NewID() }

func ptyCreate(t *testing.T, ctx context.Context, c *client.Client) string {
	t.Helper()
	id, err := c.CreatePTY(ctx, wire.CreatePTYRequest{})
	if err != nil {
		t.Fatalf("create pty session: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.DeletePTY(ctx, id); err != nil && client.CodeOf(err) != sandbox.CodeSessionNotFound {
			t.Errorf("delete pty session %s: %v", id, err)
		}
	})
	return id
}

// ptyAttach attaches, retrying while a client that has just closed still
// holds the session; the connection is closed when the test ends.
func ptyAttach(t *testing.T, ctx context.Context, c *client.Client, id string, opts client.AttachOptions) *ptyReader {
	t.Helper()
	delay := time.Millisecond
	for {
		pc, err := c.AttachPTY(ctx, id, opts)
		if err == nil {
			t.Cleanup(func() { pc.Close() })
			return &ptyReader{pc: pc}
		}
		if client.CodeOf(err) != sandbox.CodeConflict || ctx.Err() != nil {
			t.Fatalf("attach pty session %s: %v", id, err)
		}
		time.Sleep(delay)
		delay = min(2*delay, 50*time.Millisecond)
	}
}

// ptyProcessAlive reports whether pid is a live (not zombie) process in b.
func ptyProcessAlive(t *testing.T, b *Box, pid string) bool {
	ex := run(t, b, `read -r line 2>/dev/null </proc/`+pid+`/stat || exit 1; set -- ${line##*)}; [ "$1" != Z ]`)
	return ex.ExitCode == 0
}

// ptyReader collects what a PTY connection receives.
type ptyReader struct {
	pc        *client.PTYConn
	all       bytes.Buffer // output of every channel, replay included
	stdout    bytes.Buffer
	stderr    bytes.Buffer
	replay    []client.PTYFrame
	connected *wire.PTYFrame
	exit      *int
	err       error // what ended the connection
}

// until reads frames until cond holds; it fails the test if the connection
// or ctx ends first.
func (r *ptyReader) until(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		if r.err != nil {
			t.Fatalf("waiting for %s: %v; output so far %q", what, r.err, r.all.String())
		}
		r.next(ctx)
	}
}

func (r *ptyReader) waitFor(t *testing.T, ctx context.Context, text string) {
	t.Helper()
	r.until(t, ctx, fmt.Sprintf("%q", text), func() bool { return bytes.Contains(r.all.Bytes(), []byte(text)) })
}

// drain reads until the connection ends and returns what ended it.
func (r *ptyReader) drain(ctx context.Context) error {
	for r.err == nil {
		r.next(ctx)
	}
	return r.err
}

func (r *ptyReader) next(ctx context.Context) {
	f, err := r.pc.Next(ctx)
	if err != nil {
		r.err = err
		return
	}
	if f.Control != nil {
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

func (r *ptyReader) send(t *testing.T, s string) {
	t.Helper()
	if _, err := r.pc.Write([]byte(s)); err != nil {
		t.Fatalf("send %q: %v", s, err)
	}
}
