// Package enginetest is the conformance suite every engine adapter passes:
// its descriptor, launch and encodings, and the classification of recorded
// program output (fixtures, one per program version) into the closed event
// set, with the ordering guarantees the runner relies on.
package enginetest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
)

// Fixture is a recorded run of a program: its stdout, one event per line.
type Fixture struct {
	// Name names the fixture (e.g. the program version).
	Name string
	// Path is the file of recorded stdout lines.
	Path string
	// Replies is how many replies the recording holds.
	Replies int
}

// Run runs the suite against ad with the given fixtures.
func Run(t *testing.T, ad engine.Adapter, fixtures ...Fixture) {
	t.Run("Descriptor", func(t *testing.T) { testDescriptor(t, ad) })
	t.Run("Launch", func(t *testing.T) { testLaunch(t, ad) })
	t.Run("Encode", func(t *testing.T) { testEncode(t, ad) })
	t.Run("DecodeGarbage", func(t *testing.T) { testGarbage(t, ad) })
	for _, f := range fixtures {
		t.Run("Fixture/"+f.Name, func(t *testing.T) { testFixture(t, ad, f) })
	}
}

func testDescriptor(t *testing.T, ad engine.Adapter) {
	d := ad.Descriptor()
	if d.Kind == "" || d.Title == "" || len(d.PermissionModes) == 0 || d.StateFormat == "" {
		t.Fatalf("incomplete descriptor %+v", d)
	}
	if d.ModelAPI != "openai-chat" && d.ModelAPI != "openai-responses" && d.ModelAPI != "anthropic-messages" {
		t.Fatalf("unknown model API %q", d.ModelAPI)
	}
}

func baseConfig(mode string) engine.Config {
	return engine.Config{SessionID: "ses_conformance", Model: "m-1", ModelBaseURL: "http://127.0.0.1:44780/v1",
		ModelKey: "abx-session-placeholder", Instructions: "Be brief.", PermissionMode: mode}
}

func testLaunch(t *testing.T, ad engine.Adapter) {
	for _, mode := range ad.Descriptor().PermissionModes {
		l, err := ad.Launch(baseConfig(mode))
		if err != nil {
			t.Fatalf("launch in mode %s: %v", mode, err)
		}
		if strings.TrimSpace(l.Command) == "" {
			t.Fatal("empty command")
		}
		found := false
		for _, v := range l.Env {
			found = found || v == "abx-session-placeholder"
		}
		if !found {
			t.Errorf("mode %s: no environment variable carries the model credential placeholder: %v", mode, l.Env)
		}
		if l.StatePath != "" && !strings.HasPrefix(l.StatePath, "/") {
			t.Errorf("state path %q is not absolute", l.StatePath)
		}
		for _, f := range l.Files {
			if !strings.HasPrefix(f.Path, "/") {
				t.Errorf("file path %q is not absolute", f.Path)
			}
		}
	}
	if _, err := ad.Launch(baseConfig("no-such-mode")); err == nil {
		t.Error("an unknown permission mode was accepted")
	}
}

func oneLine(t *testing.T, what string, b []byte) {
	t.Helper()
	if len(b) == 0 || b[len(b)-1] != '\n' || bytes.Count(b, []byte("\n")) != 1 {
		t.Fatalf("%s is not one LF-terminated line: %q", what, b)
	}
}

func testEncode(t *testing.T, ad engine.Adapter) {
	for _, content := range []string{"hello", "two\nlines", "sep\u2028arator", `quote " and \ backslash`, strings.Repeat("x", 100000)} {
		b, err := ad.EncodeInput(engine.Input{ID: "in_1", Content: content})
		if err != nil {
			t.Fatal(err)
		}
		oneLine(t, "input", b)
		if !bytes.Contains(b, []byte("in_1")) {
			t.Errorf("encoded input does not name its id: %q", b)
		}
	}
	b, err := ad.EncodeInterrupt()
	if err != nil {
		t.Fatal(err)
	}
	oneLine(t, "interrupt", b)
	if b, err := ad.EncodeAnswer(engine.Answer{InteractionID: "ia_1", Decision: "approve"}); err == nil {
		oneLine(t, "answer", b)
	}
}

func testGarbage(t *testing.T, ad engine.Adapter) {
	dec := ad.NewDecoder()
	for _, line := range []string{"", "not json", "{", `{"type":"never-heard-of-it"}`, `[]`, `null`, `{"type":42}`, "\x00\xff"} {
		for _, ev := range dec.Decode([]byte(line)) {
			if ev.Kind != engine.Diagnostic {
				t.Errorf("line %q decoded as %v, want diagnostic", line, ev.Kind)
			}
		}
	}
}

// testFixture replays a recording and checks the runner's invariants.
func testFixture(t *testing.T, ad engine.Adapter, f Fixture) {
	raw, err := os.ReadFile(f.Path)
	if err != nil {
		t.Fatal(err)
	}
	dec := ad.NewDecoder()
	var (
		inReply, ended int
		replyOpen      bool
		order          engine.ReplyOrder
	)
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		for _, ev := range dec.Decode(sc.Bytes()) {
			switch ev.Kind {
			case engine.InputConsumed:
				if replyOpen {
					t.Fatalf("input %s consumed while a reply is open", ev.InputID)
				}
				replyOpen = true
				order = engine.ReplyOrder{}
				inReply++
			case engine.Frame:
				if !replyOpen {
					t.Fatalf("frame outside a reply: %s", ev.Chunk)
				}
				checkChunk(t, ev.Chunk, &order)
			case engine.ReplyEnded:
				if !replyOpen || ev.End == nil || ev.End.Outcome == "" {
					t.Fatalf("reply end without an open reply or outcome: %+v", ev.End)
				}
				if running := order.Running(); ev.End.Outcome == engine.OutcomeCompleted && len(running) > 0 {
					t.Fatalf("reply completed while tool calls %v still run", running)
				}
				replyOpen = false
				ended++
			case engine.InteractionRequested:
				if ev.Interaction == nil || ev.Interaction.ID == "" {
					t.Fatal("interaction without an id")
				}
			}
		}
	}
	if inReply != f.Replies || ended != f.Replies || replyOpen {
		t.Fatalf("%d replies consumed, %d ended (open %v), want %d", inReply, ended, replyOpen, f.Replies)
	}
}

// checkChunk checks one UI chunk's type and its place in the reply
// (engine.ReplyOrder, the order the runner enforces).
func checkChunk(t *testing.T, raw json.RawMessage, order *engine.ReplyOrder) {
	t.Helper()
	var c struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("chunk is not JSON: %s", raw)
	}
	if !wire.ChunkType(c.Type).Known() {
		t.Fatalf("unknown chunk type %q", c.Type)
	}
	if err := order.Accept(raw); err != nil {
		t.Fatalf("out of order: %v", err)
	}
}
