package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// serveProcess is an `astrabox serve` process with the native backend.
type serveProcess struct {
	t       *testing.T
	bin     string
	dataDir string
	addr    string
	args    []string // beyond --listen, --data-dir and --api-key
	cmd     *exec.Cmd
	exited  chan struct{}
	log     *lockedBuffer
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newServeProcess(t *testing.T, args ...string) *serveProcess {
	testenv.NeedRoot(t)
	dataDir, err := os.MkdirTemp("", "astrabox-kill-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o711); err != nil { // box uids traverse it
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if len(args) == 0 {
		args = []string{"--backends", "native"}
	}
	p := &serveProcess{t: t, bin: testenv.AstraboxBinary(t), dataDir: dataDir, addr: addr, args: args, log: &lockedBuffer{}}
	sum := sha256.Sum256([]byte(filepath.Join(dataDir, "native")))
	cgroupParent := "astrabox-" + hex.EncodeToString(sum[:4])
	t.Cleanup(func() {
		p.stop()
		for _, backend := range []string{"native", "docker"} {
			bin := filepath.Join(dataDir, backend, "bin")
			if err := unix.Unmount(bin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				t.Errorf("unmount %s: %v", bin, err)
			}
		}
		for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "freezer", ""} { // once empty, the native backend's cgroup parent
			_ = os.Remove(filepath.Join("/sys/fs/cgroup", c, cgroupParent))
		}
		if err := os.RemoveAll(dataDir); err != nil {
			t.Errorf("remove data dir: %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", p.log.String())
		}
	})
	return p
}

// start runs the server and waits until it answers.
func (p *serveProcess) start() {
	p.t.Helper()
	p.cmd = exec.Command(p.bin, append([]string{"serve", "--listen", p.addr, "--data-dir", p.dataDir, "--api-key", servertest.Key}, p.args...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	if err := p.cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	p.exited = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get("http://" + p.addr + "/healthz"); err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-p.exited:
			p.t.Fatalf("astrabox serve exited:\n%s", p.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.t.Fatal("astrabox serve did not answer within 30s")
}

// kill9 kills the server at once, as a crash would.
func (p *serveProcess) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

func (p *serveProcess) stop() {
	if p.cmd == nil {
		return
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		p.t.Error("astrabox serve did not stop within 20s of SIGTERM")
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// TestKillServerMidReply: `kill -9` of the server while the agent runs a
// tool, then a restart: the new process re-attaches to the running program
// by byte offset, the reply completes, and the log is gap-free with no
// frame lost or repeated.
func TestKillServerMidReply(t *testing.T) {
	p := newServeProcess(t)
	p.start()
	model := fakemodel.New(t, fakemodel.Call("shell", map[string]any{"command": "sleep 3; echo slept"}),
		fakemodel.Text("done after the sleep")).WithKey(servertest.ModelKey)
	h := &harness{Env: servertest.Attach(t, "http://"+p.addr, "native", model), t: t, model: model}
	sid := h.session(h.agent("auto", nil))
	rc := h.send(sid, "go", "")
	h.events(sid, 0, func(e logEvent) bool { return e.Type == "tool-input-available" })
	p.kill9()
	p.start()
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	checkGapFree(t, evs, 1)
	counts := map[string]int{}
	var text strings.Builder
	for _, f := range frames(evs) {
		counts[f["type"].(string)]++
		if f["type"] == "text-delta" {
			text.WriteString(f["delta"].(string))
		}
		if f["type"] == "tool-output-available" {
			if out, _ := f["output"].(map[string]any); !strings.Contains(out["stdout"].(string), "slept") {
				t.Errorf("tool output %v", out)
			}
		}
	}
	for typ, want := range map[string]int{"start": 1, "tool-input-available": 1, "tool-output-available": 1, "finish": 1} {
		if counts[typ] != want {
			t.Errorf("%d %s frames across the crash, want %d: %v", counts[typ], typ, want, counts)
		}
	}
	if text.String() != "done after the sleep" {
		t.Fatalf("text %q", text.String())
	}
	h.waitState(sid, "READY")
	h.must(204, "DELETE", "/api/v1/sessions/"+sid, nil, nil)
}

// TestReplySurvivesServerMidStream: the server holding a Session stops
// while the model's answer streams (200 deltas). Killed with -9 and
// started again, the built-in agent makes the broken model call again
// once the model path is back: the reply completes, its message is
// marked where the answer started again (data-step-broken), its last
// step's text is the model's whole answer, and the log is gap-free.
// Stopped with SIGTERM, the server lets the reply finish first.
func TestReplySurvivesServerMidStream(t *testing.T) {
	answer := longAnswer
	for _, tc := range []struct {
		name   string
		stop   func(*serveProcess)
		broken bool
	}{
		{"kill -9", (*serveProcess).kill9, true},
		{"SIGTERM", (*serveProcess).stop, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newServeProcess(t)
			p.start()
			model := fakemodel.New(t, fakemodel.Text(answer).WithDelay(15*time.Millisecond), fakemodel.Text(answer)).WithKey(servertest.ModelKey)
			h := &harness{Env: servertest.Attach(t, "http://"+p.addr, "native", model), t: t, model: model}
			sid := h.session(h.agent("auto", nil))
			rc := h.send(sid, "tell me", "")
			h.waitDeltas(sid, 20)
			stopped := time.Now()
			tc.stop(p)
			p.start()
			evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
			t.Logf("the reply ended %v after the server stopped", time.Since(stopped).Round(time.Millisecond))
			if marks := checkWholeAnswer(t, evs, answer); tc.broken != (marks > 0) {
				t.Fatalf("%d data-step-broken marks; want some: %v", marks, tc.broken)
			}
			if n := len(model.Requests()); (tc.broken && n != 2) || (!tc.broken && n != 1) {
				t.Fatalf("the model was asked %d times", n)
			}
			h.waitState(sid, "READY")
			h.must(204, "DELETE", "/api/v1/sessions/"+sid, nil, nil)
		})
	}
}

// longAnswer is a model answer of 200 deltas (of 8 runes each).
var longAnswer = strings.Repeat("The answer streams on, piece by piece. ", 42)[:1600]

// checkWholeAnswer fails t unless evs, the log of one reply, is gap-free
// and complete (one finish, no failure) with answer as its last step's
// text; it returns how many data-step-broken marks the reply has.
func checkWholeAnswer(t *testing.T, evs []logEvent, answer string) (marks int) {
	t.Helper()
	checkGapFree(t, evs, 1)
	var last strings.Builder // the text of the reply's last step
	finish := 0
	for _, f := range frames(evs) {
		switch f["type"] {
		case "start-step":
			last.Reset()
		case "text-delta":
			last.WriteString(f["delta"].(string))
		case "data-step-broken":
			marks++
		case "finish":
			finish++
		case "data-turn-failure":
			t.Fatalf("the reply failed: %v", f)
		}
	}
	if last.String() != answer || finish != 1 {
		t.Fatalf("the last step's text is %d runes (want the model's %d), %d finish frames: %s", len(last.String()), len(answer), finish, summarize(evs))
	}
	return marks
}

// waitDeltas returns once Session sid's log holds n text-deltas.
func (h *harness) waitDeltas(sid string, n int) {
	h.t.Helper()
	deltas := 0
	h.events(sid, 0, func(e logEvent) bool {
		if e.Type == "text-delta" {
			deltas++
		}
		return deltas == n
	})
}

// TestStopWaitsForRepliesAndASecondSignalExits: on SIGTERM the server
// keeps a reply in progress going and says, each second, which Sessions
// it waits for; a second SIGTERM ends it at once, the reply still held.
func TestStopWaitsForRepliesAndASecondSignalExits(t *testing.T) {
	p := newServeProcess(t)
	p.start()
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	model := fakemodel.New(t, fakemodel.Text("held until the test ends").HoldUntil(gate)).WithKey(servertest.ModelKey)
	h := &harness{Env: servertest.Attach(t, "http://"+p.addr, "native", model), t: t, model: model}
	sid := h.session(h.agent("auto", nil))
	h.send(sid, "hold on", "")
	h.events(sid, 0, func(e logEvent) bool { return e.Type == "text-delta" })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	waiting := "waiting for replies in progress"
	for !strings.Contains(p.log.String(), waiting) {
		select {
		case <-p.exited:
			t.Fatalf("the server exited with a reply in progress:\n%s", p.log.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	if line := lineWith(p.log.String(), waiting); !strings.Contains(line, sid) {
		t.Fatalf("the wait does not name the Session %s: %s", sid, line)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(time.Minute):
		t.Fatal("a second SIGTERM did not end the server")
	}
	if !strings.Contains(p.log.String(), "second signal") {
		t.Fatalf("the log does not say why it exited:\n%s", p.log.String())
	}
	p.start() // the reply's Session is taken up again; the test's end releases the model
	h.must(204, "DELETE", "/api/v1/sessions/"+sid, nil, nil)
}

// lineWith is the first line of s holding sub.
func lineWith(s, sub string) string {
	for line := range strings.Lines(s) {
		if strings.Contains(line, sub) {
			return line
		}
	}
	return ""
}
