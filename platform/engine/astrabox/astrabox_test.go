package astrabox_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/agent"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/engine/astrabox"
	"github.com/astrabox/astrabox/platform/engine/enginetest"
)

var update = flag.Bool("update", false, "re-record testdata/agent.jsonl from the built-in agent")

const fixture = "testdata/agent.jsonl"

func TestConformance(t *testing.T) {
	if *update {
		record(t)
	}
	enginetest.Run(t, astrabox.New(), enginetest.Fixture{Name: "agent", Path: fixture, Replies: 3})
}

// TestRecordingIsCurrent replays the agent now and checks the recorded
// fixture still has the same shape of events (types in order), so the
// fixture cannot drift from the program.
func TestRecordingIsCurrent(t *testing.T) {
	got := types(t, run(t))
	want := types(t, mustRead(t, fixture))
	if got != want {
		t.Fatalf("the built-in agent's output changed; re-record with go test -update:\nnow:      %s\nrecorded: %s", got, want)
	}
}

func TestDecodeClassifies(t *testing.T) {
	tests := []struct {
		line string
		kind engine.Kind
	}{
		{`{"type":"ready","conversation_id":"c1","resumed":true,"inputs":["in_1"]}`, engine.NativeKey},
		{`{"type":"input.received","id":"in_1"}`, engine.InputReceived},
		{`{"type":"input.consumed","id":"in_1"}`, engine.InputConsumed},
		{`{"type":"text.delta","id":"t","delta":"x"}`, engine.Frame},
		{`{"type":"approval.request","interaction_id":"ia","tool_call_id":"c","name":"shell","input":{}}`, engine.Frame},
		{`{"type":"turn.end","input_id":"in_1","outcome":"completed","finish_reason":"stop"}`, engine.ReplyEnded},
		{`{"type":"state.saved","bytes":10}`, engine.StateGrew},
		{`{"type":"model.retry","attempt":1,"max_attempts":6,"delay_ms":1000,"error":"model stream: read: reset","after_output":true}`, engine.Frame},
		{`{"type":"state","state":"working"}`, engine.StateChanged},
		{`{"type":"log","message":"hi"}`, engine.Diagnostic},
		{`{"type":"surprise"}`, engine.Diagnostic},
	}
	for _, tc := range tests {
		evs := astrabox.New().NewDecoder().Decode([]byte(tc.line))
		if len(evs) == 0 || evs[0].Kind != tc.kind {
			t.Errorf("%s: %v, want first kind %v", tc.line, evs, tc.kind)
		}
	}
	evs := astrabox.New().NewDecoder().Decode([]byte(`{"type":"turn.end","input_id":"in_1","outcome":"failed","error":{"code":"MODEL_ERROR","message":"m"}}`))
	if evs[0].End.ErrorCode != "MODEL_ERROR" || evs[0].End.Outcome != engine.OutcomeFailed {
		t.Fatalf("failed end %+v", evs[0].End)
	}
}

// run drives the built-in agent through three replies: text, a tool call
// that writes and runs a file, and a failed model call.
func run(t *testing.T) []byte {
	model := fakemodel.New(t,
		fakemodel.Text("Hello there.").WithReasoning("thinking"),
		fakemodel.Call("write_file", map[string]any{"path": "a.sh", "content": "echo hi\n"}),
		fakemodel.Call("shell", map[string]any{"command": "bash a.sh"}),
		fakemodel.Text("Ran it."),
		fakemodel.Status(500, `{"error":{"message":"boom"}}`),
	)
	dir := t.TempDir()
	inR, inW := io.Pipe()
	var out bytes.Buffer
	done := make(chan error, 1)
	outR, outW := io.Pipe()
	go func() {
		done <- agent.Run(context.Background(), agent.Config{StatePath: filepath.Join(dir, "state.jsonl"), Workspace: dir,
			PermissionMode: "auto", ModelURL: model.URL(), ModelKey: "k", Model: "m"}, inR, outW)
		outW.Close()
	}()
	sc := bufio.NewScanner(outR)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	ended := 0
	go func() { // the agent writes "ready" before it reads
		for i := 1; i <= 3; i++ {
			fmt.Fprintf(inW, `{"type":"input","id":"in_%d","content":"task %d"}`+"\n", i, i)
		}
	}()
	deadline := time.AfterFunc(30*time.Second, func() { inW.CloseWithError(fmt.Errorf("timeout")); outR.Close() })
	defer deadline.Stop()
	for sc.Scan() {
		line := sc.Text()
		// Times and ids that vary between runs are kept: types() compares
		// shapes only.
		out.WriteString(line + "\n")
		if strings.Contains(line, `"type":"turn.end"`) {
			ended++
			if ended == 3 {
				inW.Close()
			}
		}
	}
	if err := <-done; err != nil {
		t.Fatalf("agent: %v", err)
	}
	if ended != 3 {
		t.Fatalf("%d replies ended:\n%s", ended, out.String())
	}
	return out.Bytes()
}

func record(t *testing.T) {
	if err := os.MkdirAll("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fixture, run(t), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (record it with go test -update)", err)
	}
	return b
}

// types lists the event types of a recording in order, collapsing runs
// of deltas (their count depends on chunking).
func types(t *testing.T, b []byte) string {
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		i := strings.Index(line, `"type":"`)
		if i < 0 {
			continue
		}
		rest := line[i+8:]
		typ := rest[:strings.IndexByte(rest, '"')]
		// Acknowledgements and program states interleave with a reply as
		// the inputs happen to arrive; the reply's own shape is compared.
		if typ == "log" || typ == "state.saved" || typ == "input.received" || typ == "state" ||
			(len(out) > 0 && out[len(out)-1] == typ && strings.HasSuffix(typ, ".delta")) {
			continue
		}
		out = append(out, typ)
	}
	return strings.Join(out, " ")
}

// TestDecodeModelRetry: a model call made again after output marks the
// message (data-step-broken, kept); one made again before any output is a
// transient data-retry.
func TestDecodeModelRetry(t *testing.T) {
	for _, tc := range []struct {
		afterOutput bool
		want        string
	}{{true, `{"data":{"attempt":2,"delayMs":2000,"error":"model stream: read: reset","maxAttempts":6},"type":"data-step-broken"}`},
		{false, `{"data":{"attempt":2,"delayMs":2000,"error":"model stream: read: reset","maxAttempts":6},"transient":true,"type":"data-retry"}`}} {
		line := fmt.Sprintf(`{"type":"model.retry","attempt":2,"max_attempts":6,"delay_ms":2000,"error":"model stream: read: reset","after_output":%v}`, tc.afterOutput)
		evs := astrabox.New().NewDecoder().Decode([]byte(line))
		if len(evs) != 1 || evs[0].Kind != engine.Frame || string(evs[0].Chunk) != tc.want {
			t.Fatalf("after_output %v: %+v, want the frame %s", tc.afterOutput, evs, tc.want)
		}
	}
}
