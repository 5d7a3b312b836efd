package runner

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/store"
)

// TestRunnerRefusesOutOfOrder: a frame that breaks the reply's protocol
// order (as one written into the program's output by another process
// would) is not recorded, nor is a completed end while a tool still runs;
// the program's real frames that follow still are.
func TestRunnerRefusesOutOfOrder(t *testing.T) {
	ctx := context.Background()
	r := &runner{log: slog.New(slog.NewTextHandler(io.Discard, nil)), turn: &turn{id: "turn_1", inputID: "in_1", messageID: "msg_in_1"}}
	frame := func(c string) engine.Event { return engine.Event{Kind: engine.Frame, Chunk: json.RawMessage(c)} }
	steps := []struct {
		ev       engine.Event
		recorded string // the entry type recorded, "" for none
	}{
		{frame(`{"type":"text-start","id":"t1"}`), "text-start"},
		{frame(`{"type":"text-delta","id":"t9","delta":"FORGED"}`), "program.out_of_order"},
		{frame(`{"type":"text-delta","id":"t1","delta":"real"}`), "text-delta"},
		{frame(`{"type":"tool-output-available","toolCallId":"c1","output":"forged"}`), ""}, // refused again: logged only
		{frame(`{"type":"text-end","id":"t1"}`), "text-end"},
		{frame(`{"type":"tool-input-available","toolCallId":"c1","toolName":"shell","input":{}}`), "tool-input-available"},
		{engine.Event{Kind: engine.ReplyEnded, End: &engine.ReplyEnd{InputID: "in_1", Outcome: engine.OutcomeCompleted}}, ""},
		{frame(`{"type":"tool-output-available","toolCallId":"c1","output":"done"}`), "tool-output-available"},
	}
	for i, st := range steps {
		es, _ := r.classify(ctx, st.ev)
		got := ""
		if len(es) > 0 {
			got = es[0].Type
		}
		if got != st.recorded || len(es) > 1 {
			t.Fatalf("step %d: recorded %v, want one %q", i, types(es), st.recorded)
		}
		if r.turn == nil {
			t.Fatalf("step %d ended the reply", i)
		}
	}
	if r.turn.refused != 3 {
		t.Fatalf("refused %d events, want 3", r.turn.refused)
	}
}

func types(es []store.LogEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Type)
	}
	return out
}
