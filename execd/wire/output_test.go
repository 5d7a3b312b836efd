package wire

import (
	"encoding/json"
	"testing"
)

func TestOutputEventRoundTrip(t *testing.T) {
	for _, text := range []string{"", "hello\n", "quote \" backslash \\ nul \x00 € \xff <b>"} {
		for _, typ := range []string{EventStdout, EventStderr} {
			data := AppendOutputEvent(nil, typ, text, 1700000000123)
			var std Event
			if err := json.Unmarshal(data, &std); err != nil {
				t.Fatalf("%s is not valid JSON: %v", data, err)
			}
			fast, ok := ParseOutputEvent(data)
			if !ok || fast.Type != typ || fast.Text != std.Text || fast.Timestamp != 1700000000123 {
				t.Fatalf("parse %s: %+v %v; encoding/json: %+v", data, fast, ok, std)
			}
		}
	}
}

func TestParseOutputEventRejectsOtherShapes(t *testing.T) {
	for _, in := range []string{
		`{"type":"stdout","text":"a","timestamp":1,"exit_code":0}`,
		`{"type":"init","text":"a","timestamp":1}`,
		`{"type":"stdout","text":"a"}`,
		`{"type":"stdout","text":"a","timestamp":x}`,
		`{"type":"stdout","text":"a`,
	} {
		if _, ok := ParseOutputEvent([]byte(in)); ok {
			t.Errorf("accepted %s", in)
		}
	}
}

func FuzzParseOutputEvent(f *testing.F) {
	f.Add([]byte(`{"type":"stdout","text":"a\n","timestamp":5}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, ok := ParseOutputEvent(data)
		if !ok {
			return
		}
		var std Event
		if err := json.Unmarshal(data, &std); err != nil || std.Text != ev.Text || std.Type != ev.Type || std.Timestamp != ev.Timestamp {
			t.Fatalf("fast parse of %q = %+v; encoding/json %+v (%v)", data, ev, std, err)
		}
	})
}
