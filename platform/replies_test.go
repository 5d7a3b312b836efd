package platform

import (
	"encoding/json"
	"testing"

	"github.com/astrabox/astrabox/store"
)

// logOf builds a log from (type, turn) pairs, seqs from 1.
func logOf(pairs ...string) []store.LogEntry {
	var out []store.LogEntry
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, store.LogEntry{Seq: int64(len(out) + 1), Type: pairs[i], TurnID: pairs[i+1], InputID: "in_" + pairs[i+1],
			MessageID: "msg_in_" + pairs[i+1], Payload: json.RawMessage(`{"type":"` + pairs[i] + `"}`)})
	}
	return out
}

func TestResumePoint(t *testing.T) {
	// 1 input.accepted(a) 2 turn.started(a) 3 data-turn-accepted(a) 4 start(a) 5 text-delta(a) 6 finish(a)
	// 7 turn.ended(a) 8 input.accepted(b) 9 data-turn-accepted(b) 10 start(b) 11 text-delta(b)
	log := logOf("input.accepted", "a", "turn.started", "a", "data-turn-accepted", "a", "start", "a", "text-delta", "a", "finish", "a",
		"turn.ended", "a", "input.accepted", "b", "data-turn-accepted", "b", "start", "b", "text-delta", "b")
	replies := Replies(log)
	if len(replies) != 2 || replies[0].Start != 3 || replies[0].End != 6 || replies[1].Start != 9 || replies[1].End != 0 {
		t.Fatalf("replies %+v", replies)
	}
	tests := []struct {
		after     int64
		wantTurn  string
		wantFound bool
	}{
		{0, "a", true},  // before everything: the first reply
		{2, "a", true},  // control events before the reply
		{3, "a", true},  // at the reply's first frame: inside it, restart it
		{5, "a", true},  // inside a finished reply: that reply from its start
		{6, "b", true},  // at a reply's finish: the next reply
		{8, "b", true},  // between replies
		{10, "b", true}, // inside the active reply
		{11, "b", true}, // at the end of the active reply: still it
	}
	for _, tc := range tests {
		r, ok := ResumePoint(replies, tc.after)
		if ok != tc.wantFound || r.TurnID != tc.wantTurn {
			t.Errorf("after %d: %+v %v, want turn %q found %v", tc.after, r, ok, tc.wantTurn, tc.wantFound)
		}
	}
	finished := Replies(logOf("data-turn-accepted", "a", "start", "a", "finish", "a", "turn.ended", "a"))
	for _, after := range []int64{3, 4, 100} {
		if r, ok := ResumePoint(finished, after); ok {
			t.Errorf("after %d past the last finished reply: got %+v, want none (204)", after, r)
		}
	}
	if r, ok := ActiveReply(replies); !ok || r.TurnID != "b" {
		t.Fatalf("active reply %+v %v", r, ok)
	}
	if _, ok := ActiveReply(finished); ok {
		t.Fatal("a finished log has no active reply")
	}
}

func TestIsFrame(t *testing.T) {
	for typ, want := range map[string]bool{"text-delta": true, "data-turn-accepted": true, "finish": true,
		"input.accepted": false, "state.changed": false, "native_state.saved": false} {
		if got := IsFrame(store.LogEntry{Type: typ}); got != want {
			t.Errorf("IsFrame(%s) = %v", typ, got)
		}
	}
}

func TestFoldMessages(t *testing.T) {
	e := func(seq int64, typ, turn, payload string) store.LogEntry {
		return store.LogEntry{Seq: seq, Type: typ, TurnID: turn, InputID: "in_" + turn, MessageID: "msg_in_" + turn, Payload: json.RawMessage(payload)}
	}
	log := []store.LogEntry{
		e(1, "input.accepted", "a", `{"content":"hi"}`),
		e(2, "data-turn-accepted", "a", `{"type":"data-turn-accepted","data":{}}`),
		e(3, "start", "a", `{"type":"start","messageId":"msg_in_a"}`),
		e(4, "start-step", "a", `{"type":"start-step"}`),
		e(5, "text-start", "a", `{"type":"text-start","id":"t1"}`),
		e(6, "text-delta", "a", `{"type":"text-delta","id":"t1","delta":"Hel"}`),
		e(7, "text-delta", "a", `{"type":"text-delta","id":"t1","delta":"lo"}`),
		e(8, "text-end", "a", `{"type":"text-end","id":"t1"}`),
		e(9, "tool-input-start", "a", `{"type":"tool-input-start","toolCallId":"c1","toolName":"shell","dynamic":true}`),
		e(10, "tool-input-available", "a", `{"type":"tool-input-available","toolCallId":"c1","toolName":"shell","input":{"command":"ls"},"dynamic":true}`),
		e(11, "tool-output-available", "a", `{"type":"tool-output-available","toolCallId":"c1","output":{"exit_code":0},"dynamic":true}`),
		e(12, "finish", "a", `{"type":"finish","finishReason":"stop"}`),
	}
	msgs := FoldMessages(log)
	if len(msgs) != 2 || msgs[0].ID != "in_a" || msgs[0].Role != "user" || msgs[1].ID != "msg_in_a" {
		t.Fatalf("messages %+v", msgs)
	}
	parts := msgs[1].Parts
	if len(parts) != 3 || parts[0]["type"] != "step-start" || parts[1]["text"] != "Hello" || parts[1]["state"] != "done" {
		t.Fatalf("parts %+v", parts)
	}
	if parts[2]["type"] != "dynamic-tool" || parts[2]["state"] != "output-available" || parts[2]["toolName"] != "shell" {
		t.Fatalf("tool part %+v", parts[2])
	}
}

func TestNewIDSortsByTime(t *testing.T) {
	a := NewID("ses", testTime(1))
	b := NewID("ses", testTime(2))
	if !(a < b) || len(a) != len("ses_")+16 {
		t.Fatalf("ids %s %s", a, b)
	}
}
