package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestReplyOrder: each sequence is accepted up to its last chunk, which is
// refused when want names why (a substring of the error).
func TestReplyOrder(t *testing.T) {
	tests := []struct {
		name   string
		chunks []string
		want   string // "" when the last chunk is accepted
	}{
		{"text part", []string{`{"type":"text-start","id":"t"}`, `{"type":"text-delta","id":"t","delta":"a"}`, `{"type":"text-end","id":"t"}`}, ""},
		{"a part id used again after its end", []string{`{"type":"text-start","id":"t"}`, `{"type":"text-end","id":"t"}`, `{"type":"text-start","id":"t"}`}, ""},
		{"text and reasoning share an id", []string{`{"type":"reasoning-start","id":"x"}`, `{"type":"text-start","id":"x"}`}, ""},
		{"delta without start", []string{`{"type":"text-delta","id":"t","delta":"forged"}`}, "not open"},
		{"delta after end", []string{`{"type":"text-start","id":"t"}`, `{"type":"text-end","id":"t"}`, `{"type":"text-delta","id":"t","delta":"x"}`}, "not open"},
		{"start twice", []string{`{"type":"reasoning-start","id":"r"}`, `{"type":"reasoning-start","id":"r"}`}, "already open"},
		{"end without start", []string{`{"type":"reasoning-end","id":"r"}`}, "not open"},
		{"tool call", []string{`{"type":"tool-input-start","toolCallId":"c"}`, `{"type":"tool-input-delta","toolCallId":"c"}`,
			`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-output-available","toolCallId":"c","preliminary":true}`,
			`{"type":"tool-output-available","toolCallId":"c"}`}, ""},
		{"input without start", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-output-error","toolCallId":"c"}`}, ""},
		{"approval then denial", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-approval-request","toolCallId":"c"}`, `{"type":"tool-output-denied","toolCallId":"c"}`}, ""},
		{"output of an unknown call", []string{`{"type":"tool-output-available","toolCallId":"c"}`}, "not running"},
		{"second outcome", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-output-available","toolCallId":"c"}`, `{"type":"tool-output-error","toolCallId":"c"}`}, "not running"},
		{"output while input streams", []string{`{"type":"tool-input-start","toolCallId":"c"}`, `{"type":"tool-output-available","toolCallId":"c"}`}, "not running"},
		{"input given twice", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-input-available","toolCallId":"c"}`}, "already given"},
		{"call begun twice", []string{`{"type":"tool-input-start","toolCallId":"c"}`, `{"type":"tool-input-start","toolCallId":"c"}`}, "already began"},
		{"input delta after input", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-input-delta","toolCallId":"c"}`}, "not streaming"},
		{"approval of a finished call", []string{`{"type":"tool-input-available","toolCallId":"c"}`, `{"type":"tool-output-available","toolCallId":"c"}`, `{"type":"tool-approval-request","toolCallId":"c"}`}, "not waiting"},
		{"unordered chunks", []string{`{"type":"start-step"}`, `{"type":"data-x","data":1}`, `{"type":"finish-step"}`}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var o ReplyOrder
			for i, c := range tc.chunks {
				err := o.Accept(json.RawMessage(c))
				last := i == len(tc.chunks)-1
				switch {
				case !last && err != nil:
					t.Fatalf("chunk %d %s refused: %v", i, c, err)
				case last && tc.want == "" && err != nil:
					t.Fatalf("last chunk %s refused: %v", c, err)
				case last && tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
					t.Fatalf("last chunk %s: %v, want an error with %q", c, err, tc.want)
				}
			}
		})
	}
}

// TestReplyOrderRefusedChunkNotRecorded: a refused chunk changes nothing,
// so the program's real frames still fit after a forged one.
func TestReplyOrderRefusedChunkNotRecorded(t *testing.T) {
	var o ReplyOrder
	for _, c := range []string{`{"type":"tool-input-available","toolCallId":"a"}`, `{"type":"tool-input-available","toolCallId":"b"}`} {
		if err := o.Accept(json.RawMessage(c)); err != nil {
			t.Fatal(err)
		}
	}
	if got := o.Running(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("running %v", got)
	}
	if err := o.Accept(json.RawMessage(`{"type":"tool-input-start","toolCallId":"a"}`)); err == nil {
		t.Fatal("a call begun again was accepted")
	}
	if err := o.Accept(json.RawMessage(`{"type":"tool-output-available","toolCallId":"a"}`)); err != nil {
		t.Fatalf("the real outcome after a refused chunk: %v", err)
	}
	if got := o.Running(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("running %v", got)
	}
}
