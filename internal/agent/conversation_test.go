package agent

import (
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

func TestRepair(t *testing.T) {
	user := message{Role: roleUser, Content: "hi"}
	answer := message{Role: roleAssistant, Content: "hello"}
	calls := message{Role: roleAssistant, ToolCalls: []toolCall{{ID: "c1"}, {ID: "c2"}}}
	result := func(id string) message { return message{Role: roleTool, ToolCallID: id, Content: "{}"} }
	for _, tc := range []struct {
		name    string
		history []message
		want    string // role[:tool_call_id] of the added messages
	}{
		{"empty", nil, ""},
		{"answered", []message{user, answer}, ""},
		{"no reply", []message{user}, "assistant"},
		{"calls without results", []message{user, calls}, "tool:c1 tool:c2 assistant"},
		{"one result missing", []message{user, calls, result("c1")}, "tool:c2 assistant"},
		{"results, no answer", []message{user, calls, result("c1"), result("c2")}, "assistant"},
		{"old calls are complete", []message{user, calls, result("c1"), result("c2"), answer, user}, "assistant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inputs := make([]string, len(tc.history))
			for i := range inputs {
				inputs[i] = "in_1"
			}
			var got []string
			for _, r := range repair(tc.history, inputs) {
				s := r.Message.Role
				if r.Message.ToolCallID != "" {
					s += ":" + r.Message.ToolCallID
				}
				if r.InputID != "in_1" || r.Type != recordMessage {
					t.Errorf("record %+v", r)
				}
				got = append(got, s)
			}
			if strings.Join(got, " ") != tc.want {
				t.Fatalf("added %v, want %q", got, tc.want)
			}
		})
	}
}

func TestConversationFileSurvivesACrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.jsonl")
	lines := []string{
		`{"type":"meta","conversation_id":"conv_x","created_at":"2025-01-01T00:00:00Z"}`,
		`{"type":"consumed","input_id":"in_1"}`,
		`{"type":"message","input_id":"in_1","message":{"role":"user","content":"list files"}}`,
		`this line is garbage`,
		`{"type":"future_record","x":1}`,
		`{"type":"message","input_id":"in_1","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_9","type":"function","function":{"name":"list_dir","arguments":"{}"}}]}}`,
	}
	torn := `{"type":"message","input_id":"in_1","message":{"role":"tool","tool_`
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"+torn), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := openConversation(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c.id != "conv_x" || !c.resumed || len(c.messages) != 2 || strings.Join(c.consumed, ",") != "in_1" {
		t.Fatalf("read back %+v", c)
	}
	if fi, _ := os.Stat(path); fi.Size() != c.size || strings.Contains(readFile(t, path), "tool_\"") {
		t.Fatalf("the torn line was not dropped: size %d, tracked %d", fi.Size(), c.size)
	}
	c.close()

	// The program resumes it: the cut-off call gets a result and a note,
	// and the model sees a valid history.
	model := fakemodel.New(t, fakemodel.Text("resumed"))
	cfg := testConfig(t, model)
	cfg.StatePath = path
	h := startAgent(t, cfg)
	ready := h.all()[0]
	if ready["resumed"] != true || ready["messages"] != 2.0 || ready.str("conversation_id") != "conv_x" {
		t.Fatalf("ready %v", ready)
	}
	h.waitType("state.saved")
	h.input("in_1", "redelivered")
	h.input("in_2", "go on")
	h.waitEnd("in_2")
	if n := h.count(func(e event) bool { return e.typ() == "input.consumed" }); n != 1 {
		t.Fatalf("%d consumed", n)
	}
	msgs := model.Requests()[0].Body.Messages
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.Role)
	}
	if strings.Join(roles, " ") != "system user assistant tool assistant user" ||
		msgs[3].ToolCallID != "call_9" || !strings.Contains(msgs[3].Content, "not run") || msgs[4].Content != noteCutOff {
		t.Fatalf("history:\n%s", model.Requests()[0].Transcript())
	}
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	// Every line of the file is a record again.
	for i, line := range strings.Split(strings.TrimSuffix(readFile(t, path), "\n"), "\n") {
		var r record
		if err := json.Unmarshal([]byte(line), &r); err != nil && i != 3 {
			t.Fatalf("line %d %q: %v", i+1, line, err)
		}
	}
}

func TestNewConversationFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "deep", "dir", "c.jsonl")
	c, err := openConversation(path, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if c.resumed || !strings.HasPrefix(c.id, "conv_") || len(c.messages) != 0 {
		t.Fatalf("%+v", c)
	}
	var meta record
	if err := json.Unmarshal([]byte(readFile(t, path)), &meta); err != nil || meta.Type != recordMeta || meta.ConversationID != c.id || meta.CreatedAt == "" {
		t.Fatalf("meta %+v %v", meta, err)
	}
}
