package pi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/engine/enginetest"
	"github.com/astrabox/astrabox/platform/wire"
)

var (
	update = flag.Bool("update", false, "re-record the fixture from a pi binary (-pi)")
	piBin  = flag.String("pi", os.Getenv("ASTRABOX_TEST_PI_BIN"), "the pi binary to record from and compare with (pi "+Version+")")
)

// fixture is the recorded output of pi Version through four replies.
var fixture = "testdata/pi-" + Version + ".jsonl"

func TestConformance(t *testing.T) {
	if *update {
		if err := os.WriteFile(fixture, record(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	enginetest.Run(t, New(), enginetest.Fixture{Name: "pi-" + Version, Path: fixture, Replies: 4})
}

// TestRecordingIsCurrent replays pi now and checks the fixture still has
// the same shape of events. The end-to-end suite (internal/server) runs pi
// itself in CI; this needs a pi binary on the host.
func TestRecordingIsCurrent(t *testing.T) {
	if *piBin == "" {
		t.Skip("no pi binary (set ASTRABOX_TEST_PI_BIN or -pi; npm ci in image/pi gives node_modules/.bin/pi)")
	}
	got, want := shape(record(t)), shape(mustRead(t, fixture))
	if got != want {
		t.Fatalf("pi's output changed; re-record with go test -update -pi PATH:\nnow:      %s\nrecorded: %s", got, want)
	}
}

// TestDecodeReplies walks the fixture through the decoder and checks what
// the runner gets: ids from the prompts' responses, the session id, the
// frames of a tool call, the outcomes.
func TestDecodeReplies(t *testing.T) {
	dec := New().NewDecoder()
	var ends []engine.ReplyEnd
	var consumed, received []string
	var frames []string
	key := ""
	sc := bufio.NewScanner(bytes.NewReader(mustRead(t, fixture)))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		for _, ev := range dec.Decode(sc.Bytes()) {
			switch ev.Kind {
			case engine.NativeKey:
				key = ev.Key
			case engine.InputReceived:
				received = append(received, ev.InputID)
			case engine.InputConsumed:
				consumed = append(consumed, ev.InputID)
			case engine.ReplyEnded:
				ends = append(ends, *ev.End)
			case engine.Frame:
				var c struct{ Type string }
				_ = json.Unmarshal(ev.Chunk, &c)
				frames = append(frames, c.Type)
			case engine.Diagnostic:
				t.Errorf("a recorded event is unknown to the adapter: %s", ev.Text)
			}
		}
	}
	if key == "" {
		t.Error("no native key from get_state")
	}
	want := []string{"in_1", "in_2", "in_3", "in_4"}
	if strings.Join(received, ",") != strings.Join(want, ",") || strings.Join(consumed, ",") != strings.Join(want, ",") {
		t.Fatalf("received %v, consumed %v; want %v", received, consumed, want)
	}
	outcomes := []string{engine.OutcomeCompleted, engine.OutcomeCompleted, engine.OutcomeFailed, engine.OutcomeInterrupted}
	for i, e := range ends {
		if e.Outcome != outcomes[i] {
			t.Errorf("reply %d ended %s, want %s (%+v)", i+1, e.Outcome, outcomes[i], e)
		}
	}
	if len(ends) != 4 || ends[2].ErrorCode != "MODEL_ERROR" || !strings.Contains(ends[2].ErrorMessage, "bad request") {
		t.Errorf("the failed reply: %+v", ends)
	}
	if ends[0].Usage.OutputTokens == 0 {
		t.Errorf("no usage counted: %+v", ends[0])
	}
	all := strings.Join(frames, " ")
	for _, f := range []string{"reasoning-start", "reasoning-delta", "text-delta", "tool-input-start", "tool-input-available", "tool-output-available"} {
		if !strings.Contains(all, f) {
			t.Errorf("no %s frame in %s", f, all)
		}
	}
}

func TestDecodeRetryAndRefusal(t *testing.T) {
	dec := New().NewDecoder()
	run := func(lines ...string) []engine.Event {
		var out []engine.Event
		for _, l := range lines {
			out = append(out, dec.Decode([]byte(l))...)
		}
		return out
	}
	has := func(evs []engine.Event, k engine.Kind) bool {
		for _, e := range evs {
			if e.Kind == k {
				return true
			}
		}
		return false
	}
	// A retryable failure: agent_end does not end the reply; the retry's
	// final failure does.
	evs := run(`{"id":"in_1","type":"response","command":"prompt","success":true}`,
		`{"type":"message_start","message":{"role":"user","content":[]}}`,
		`{"type":"message_start","message":{"role":"assistant","content":[]}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"503 service unavailable"}}`,
		`{"type":"agent_end","messages":[]}`)
	if has(evs, engine.ReplyEnded) {
		t.Fatal("a reply pi is about to retry ended")
	}
	evs = run(`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":10,"errorMessage":"503"}`,
		`{"type":"auto_retry_end","success":false,"attempt":3,"finalError":"503 service unavailable"}`)
	if !has(evs, engine.ReplyEnded) {
		t.Fatal("the retry's final failure did not end the reply")
	}
	// A refused prompt is a reply that fails at once.
	evs = run(`{"id":"in_2","type":"response","command":"prompt","success":false,"error":"no model"}`)
	if len(evs) != 2 || evs[0].Kind != engine.InputConsumed || evs[1].End.ErrorCode != "PROGRAM_REJECTED" {
		t.Fatalf("refusal: %+v", evs)
	}
	// Decoded from the middle of a run, a reply's input is not named.
	evs = New().NewDecoder().Decode([]byte(`{"type":"message_start","message":{"role":"user","content":[]}}`))
	if len(evs) != 1 || evs[0].Kind != engine.InputConsumed || evs[0].InputID != "" {
		t.Fatalf("mid-run consumption: %+v", evs)
	}
}

func TestLaunch(t *testing.T) {
	l, err := New().Launch(engine.Config{SessionID: "ses_1", Model: "gpt-x", ModelBaseURL: "http://127.0.0.1:44780/v1",
		ModelKey: "abx-session-secret", Instructions: "Be brief.", Tools: []string{"read", "bash"}, Workspace: "/workspace"})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--mode rpc", "--session '/tmp/.astrabox-pi/ses_1/conversation.jsonl'", "--tools 'read,bash'", "--model 'gpt-x'"} {
		if !strings.Contains(l.Command, want) {
			t.Errorf("command %q lacks %q", l.Command, want)
		}
	}
	for _, f := range l.Files {
		if bytes.Contains(f.Content, []byte("abx-session-secret")) {
			t.Errorf("%s holds the credential itself; it must name the variable", f.Path)
		}
	}
	if l.Env[keyEnv] != "abx-session-secret" || l.Env["PI_OFFLINE"] != "1" || l.Cwd != "/workspace" {
		t.Errorf("env %v cwd %q", l.Env, l.Cwd)
	}
	if _, err := New().Launch(engine.Config{SessionID: "ses_1", Model: "m", Tools: []string{"shell"}}); err == nil {
		t.Error("an unknown tool was accepted")
	}
}

// record runs pi (the -pi binary) against a fake model through four
// replies: reasoning and text, a tool call that writes and runs a file, a
// model error, and an interrupted reply. Its stdout is returned.
func record(t *testing.T) []byte {
	t.Helper()
	if *piBin == "" {
		t.Fatal("-update needs -pi PATH (the pi binary of version " + Version + ")")
	}
	model := fakemodel.New(t,
		fakemodel.Text("Hello there.").WithReasoning("thinking it over"),
		fakemodel.Call("bash", map[string]any{"command": "printf 'echo hi\\n' > a.sh && bash a.sh"}),
		fakemodel.Text("Ran it."),
		fakemodel.Status(400, `{"error":{"message":"bad request: no such model"}}`),
		fakemodel.Text(strings.Repeat("slow words ", 200)).WithDelay(20*time.Millisecond),
	)
	dir := t.TempDir()
	l, err := New().Launch(engine.Config{SessionID: "ses_record", Model: "m-1", ModelBaseURL: model.URL(), ModelKey: "k", Instructions: "Be brief."})
	if err != nil {
		t.Fatal(err)
	}
	local := func(p string) string { return strings.ReplaceAll(p, stateDir("ses_record"), dir) }
	for _, f := range l.Files {
		if err := os.MkdirAll(filepath.Dir(local(f.Path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(local(f.Path), f.Content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", local(strings.Replace(l.Command, "exec pi ", "exec "+engine.ShellQuote(*piBin)+" ", 1)))
	cmd.Dir = dir
	cmd.Env = os.Environ()
	for k, v := range l.Env {
		cmd.Env = append(cmd.Env, k+"="+local(v))
	}
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if _, err := stdin.Write(l.Stdin); err != nil {
		t.Fatal(err)
	}
	send := func(b []byte, err error) {
		if err == nil {
			_, err = stdin.Write(b)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	r := bufio.NewReader(stdout)
	// readUntil copies lines until one contains s.
	readUntil := func(s string) {
		for {
			line, err := r.ReadBytes('\n')
			out.Write(line)
			if err == io.EOF || err != nil {
				t.Fatalf("pi's output ended before %s: %v\n%s", s, err, out.String())
			}
			if bytes.Contains(line, []byte(s)) {
				return
			}
		}
	}
	readUntil(`"command":"get_state"`)
	for i := 1; i <= 3; i++ {
		send(New().EncodeInput(engine.Input{ID: fmt.Sprintf("in_%d", i), Content: fmt.Sprintf("task %d", i)}))
		readUntil(`"type":"agent_end"`)
	}
	send(New().EncodeInput(engine.Input{ID: "in_4", Content: "task 4"}))
	readUntil(`"text_delta"`)
	send(New().EncodeInterrupt())
	readUntil(`"type":"agent_end"`)
	readUntil(`"command":"abort"`)
	// The box's paths, not this test's.
	return bytes.ReplaceAll(out.Bytes(), []byte(dir), []byte(stateDir("ses_record")))
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with go test -update -pi PATH)", err)
	}
	return b
}

// shape lists a recording's event types in order, collapsing runs of
// message updates of one kind (their count depends on chunking).
func shape(b []byte) string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			Type   string `json:"type"`
			Update struct {
				Type string `json:"type"`
			} `json:"assistantMessageEvent"`
		}
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		typ := ev.Type
		if ev.Update.Type != "" {
			typ += "/" + ev.Update.Type
		}
		if typ == "tool_execution_update" || (len(out) > 0 && out[len(out)-1] == typ && strings.HasSuffix(typ, "_delta")) {
			continue
		}
		out = append(out, typ)
	}
	return strings.Join(out, " ")
}

// TestDecodeResumedReply: a decoder told of a reply in progress (a new
// holder re-attached mid-reply) closes the parts the log left open when
// pi's message ends, numbers its next parts past them, and ends the reply
// at pi's agent_end.
func TestDecodeResumedReply(t *testing.T) {
	dec := New().NewDecoder()
	dec.(engine.ReplyResumer).ResumeReply([]engine.PartRef{{Kind: wire.PartText, ID: "m2-t0"}})
	var chunks []string
	ended := false
	for _, l := range []string{
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"error","errorMessage":"terminated"}}`,
		`{"type":"agent_end","messages":[]}`,
		`{"type":"auto_retry_start","attempt":1,"maxAttempts":3,"delayMs":2000,"errorMessage":"terminated"}`,
		`{"type":"message_start","message":{"role":"assistant","content":[]}}`,
		`{"type":"message_update","assistantMessageEvent":{"type":"text_delta","contentIndex":0,"delta":"again"}}`,
		`{"type":"message_end","message":{"role":"assistant","content":[],"stopReason":"stop"}}`,
		`{"type":"agent_end","messages":[]}`,
	} {
		for _, e := range dec.Decode([]byte(l)) {
			switch e.Kind {
			case engine.Frame:
				var c struct {
					Type, ID string
				}
				_ = json.Unmarshal(e.Chunk, &c)
				chunks = append(chunks, strings.TrimSpace(c.Type+" "+c.ID))
			case engine.ReplyEnded:
				ended = e.End.Outcome == engine.OutcomeCompleted
			}
		}
	}
	want := []string{"text-end m2-t0", "data-model-error", "finish-step", "data-retry", "start-step", "text-start m3-t0",
		"text-delta m3-t0", "text-end m3-t0", "finish-step"}
	if !slices.Equal(chunks, want) || !ended {
		t.Fatalf("chunks %v (ended completed: %v), want %v", chunks, ended, want)
	}
}
