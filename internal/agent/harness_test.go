package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

// waitLimit is how long a test waits for something that should happen; it
// only stops a broken test from hanging and is never a measured threshold.
const waitLimit = 60 * time.Second

const testKey = "sk-test-placeholder-5f2c"

// event is one decoded stdout line.
type event map[string]any

func (e event) typ() string           { return e.str("type") }
func (e event) str(key string) string { s, _ := e[key].(string); return s }
func (e event) obj(key string) map[string]any {
	m, _ := e[key].(map[string]any)
	return m
}

// harness runs the agent through Run with piped stdin and stdout.
type harness struct {
	t     *testing.T
	cfg   Config
	stdin *io.PipeWriter
	done  chan error

	mu     sync.Mutex
	events []event
	notify chan struct{} // closed and replaced on each new event
	cursor int           // next event waitFor looks at
}

// testConfig returns a config with a fresh workspace and state file that
// talks to model.
func testConfig(t *testing.T, model *fakemodel.Server) Config {
	dir := t.TempDir()
	return Config{
		StatePath: filepath.Join(dir, "state", "conversation.jsonl"),
		Workspace: filepath.Join(dir, "workspace"),
		ModelURL:  model.URL(),
		ModelKey:  testKey,
		Model:     "test-model",
	}
}

// startAgent starts Run; the test's end closes stdin and waits for it.
func startAgent(t *testing.T, cfg Config) *harness {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	h := &harness{t: t, cfg: cfg, stdin: inW, done: make(chan error, 1), notify: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		err := Run(ctx, cfg, inR, outW)
		outW.Close()
		inR.Close()
		h.done <- err
	}()
	readDone := make(chan struct{})
	go func() {
		h.read(outR)
		close(readDone)
	}()
	t.Cleanup(func() {
		cancel()
		inW.Close()
		<-h.done
		<-readDone
	})
	h.waitType("ready")
	return h
}

func (h *harness) read(r io.Reader) {
	br := bufio.NewReader(r)
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			var ev event
			if jerr := json.Unmarshal(line, &ev); jerr != nil {
				h.t.Errorf("stdout line is not JSON: %q: %v", line, jerr)
			} else if !strings.HasSuffix(string(line), "\n") {
				h.t.Errorf("stdout line without LF: %q", line)
			}
			h.mu.Lock()
			h.events = append(h.events, ev)
			close(h.notify)
			h.notify = make(chan struct{})
			h.mu.Unlock()
		}
		if err != nil {
			return
		}
	}
}

// send writes one command line.
func (h *harness) send(cmd any) {
	h.t.Helper()
	b, err := json.Marshal(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.stdin.Write(append(b, '\n')); err != nil {
		h.t.Fatalf("write command: %v", err)
	}
}

func (h *harness) input(id, content string) {
	h.t.Helper()
	h.send(map[string]string{"type": "input", "id": id, "content": content})
}

// waitFor returns the first event from the cursor on that satisfies ok and
// moves the cursor past it.
func (h *harness) waitFor(what string, ok func(event) bool) event {
	h.t.Helper()
	deadline := time.NewTimer(waitLimit)
	defer deadline.Stop()
	for {
		h.mu.Lock()
		for ; h.cursor < len(h.events); h.cursor++ {
			if ev := h.events[h.cursor]; ok(ev) {
				h.cursor++
				h.mu.Unlock()
				return ev
			}
		}
		notify := h.notify
		h.mu.Unlock()
		select {
		case <-notify:
		case <-deadline.C:
			h.t.Fatalf("no %s event; events so far:\n%s", what, h.dump())
		}
	}
}

func (h *harness) waitType(typ string) event {
	h.t.Helper()
	return h.waitFor(typ, func(e event) bool { return e.typ() == typ })
}

// waitEnd waits for the turn.end of input id.
func (h *harness) waitEnd(id string) event {
	h.t.Helper()
	return h.waitFor("turn.end of "+id, func(e event) bool { return e.typ() == "turn.end" && e.str("input_id") == id })
}

// finish closes stdin and returns Run's result.
func (h *harness) finish() error {
	h.t.Helper()
	h.stdin.Close()
	select {
	case err := <-h.done:
		h.done <- err // for the cleanup
		return err
	case <-time.After(waitLimit):
		h.t.Fatalf("Run did not return after stdin closed; events:\n%s", h.dump())
		return nil
	}
}

// all returns every event so far.
func (h *harness) all() []event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]event(nil), h.events...)
}

// types returns the types of the events so far, without log and
// state.saved events.
func (h *harness) types() []string {
	var out []string
	for _, e := range h.all() {
		if t := e.typ(); t != "log" && t != "state.saved" {
			if t == "state" {
				t += ":" + e.str("state")
			}
			out = append(out, t)
		}
	}
	return out
}

func (h *harness) dump() string {
	var b strings.Builder
	for _, e := range h.all() {
		line, _ := json.Marshal(e)
		fmt.Fprintf(&b, "  %s\n", line)
	}
	return b.String()
}

// count returns how many events satisfy ok.
func (h *harness) count(ok func(event) bool) int {
	n := 0
	for _, e := range h.all() {
		if ok(e) {
			n++
		}
	}
	return n
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// lockedBuffer is a bytes.Buffer safe for concurrent use.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
