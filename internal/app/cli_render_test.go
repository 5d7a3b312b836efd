package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/astrabox/astrabox/client"
)

// Terminal escapes a box or a model may put in its text.
var terminalAttacks = map[string]string{
	"OSC 52 clipboard":   "\x1b]52;c;cm0gLXJmIH4K\x07",
	"clear screen":       "\x1b[2J\x1b[H",
	"window title":       "\x1b]0;owned\x1b\\",
	"hidden text":        "\x1b[8mhidden\x1b[28m",
	"C1 CSI":             "\u009b2J",
	"C1 OSC":             "\u009d0;owned\u009c",
	"right-to-left":      "\u202etxt.exe",
	"carriage return":    "safe\rowned",
	"backspace and bell": "\b\b\a",
}

// rawControls returns what in out would control a terminal, the CLI's
// own escapes (own) aside: control characters other than newline and tab,
// C1 controls, bidirectional formatting characters, and bytes that are
// not UTF-8.
func rawControls(out string, own ...string) []string {
	for _, o := range own {
		out = strings.ReplaceAll(out, o, "")
	}
	var found []string
	for i, r := range out {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(out[i:], "\uFFFD"):
			found = append(found, fmt.Sprintf("byte %#x at %d", out[i], i))
		case r == '\n' || r == '\t':
		case r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x061c || r == 0x200e || r == 0x200f ||
			(r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069):
			found = append(found, fmt.Sprintf("%U at %d", r, i))
		}
	}
	return found
}

// frame is a UI frame event of turn t with payload p.
func frame(t *testing.T, p map[string]any) client.Event {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return client.Event{Seq: 1, Type: p["type"].(string), TurnID: "turn_1", Payload: b}
}

// chatEvents is a reply that carries s in every place the chat shows box or
// model text.
func chatEvents(t *testing.T, s string) []client.Event {
	t.Helper()
	accepted, _ := json.Marshal(map[string]any{"content": "from another client " + s, "client_message_id": "theirs"})
	return []client.Event{
		{Seq: 1, Type: "input.accepted", TurnID: "turn_1", Payload: accepted},
		frame(t, map[string]any{"type": "reasoning-start", "id": "r"}),
		frame(t, map[string]any{"type": "reasoning-delta", "id": "r", "delta": "thinking " + s + "\nmore"}),
		frame(t, map[string]any{"type": "reasoning-end", "id": "r"}),
		frame(t, map[string]any{"type": "text-start", "id": "t"}),
		frame(t, map[string]any{"type": "text-delta", "id": "t", "delta": "answer " + s}),
		frame(t, map[string]any{"type": "text-end", "id": "t"}),
		frame(t, map[string]any{"type": "tool-input-available", "toolCallId": "c1", "toolName": "shell" + s, "input": map[string]any{"command": s}}),
		frame(t, map[string]any{"type": "tool-output-available", "toolCallId": "c1", "output": map[string]any{"exit_code": 0, "stdout": s, "stderr": s}}),
		frame(t, map[string]any{"type": "tool-output-available", "toolCallId": "c2", "output": s}),
		frame(t, map[string]any{"type": "tool-output-error", "toolCallId": "c3", "errorText": s}),
		frame(t, map[string]any{"type": "data-retry", "transient": true, "data": map[string]any{"attempt": 1, "error": s}}),
		frame(t, map[string]any{"type": "data-step-broken", "data": map[string]any{"attempt": 1, "error": s}}),
		frame(t, map[string]any{"type": "data-turn-failure", "data": map[string]any{"code": "MODEL_ERROR" + s, "message": s}}),
		frame(t, map[string]any{"type": "data-interaction", "data": map[string]any{"interaction_id": "ia_1", "kind": "approval",
			"tool_call_id": "c9", "tool_name": "rm" + s, "input": map[string]any{"path": s}}}),
		frame(t, map[string]any{"type": "data-interaction", "data": map[string]any{"interaction_id": "ia_2", "kind": "question",
			"questions": []string{"which one? " + s}}}),
		frame(t, map[string]any{"type": "finish", "finishReason": "stop"}),
	}
}

// TestChatShowsEscapesVisibly feeds terminal escapes through the chat's
// renderer, in text, reasoning, tool calls, failures, questions and
// another client's input: none reaches the output raw, each is shown, and
// the renderer's own dimming still works.
func TestChatShowsEscapesVisibly(t *testing.T) {
	dim := []string{"\x1b[2m", "\x1b[0m"}
	for name, attack := range terminalAttacks {
		for _, color := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s color=%v", name, color), func(t *testing.T) {
				var out, errOut strings.Builder
				l := &chatLoop{stdio: IO{Stdout: &out, Stderr: &errOut}, view: &replyView{w: &out, color: color},
					ended: map[string]bool{}, own: map[string]bool{}}
				for _, e := range chatEvents(t, attack) {
					l.handle(chatMsg{ev: &e})
				}
				var own []string
				if color {
					own = dim
					if !strings.Contains(out.String(), dim[0]) || !strings.Contains(out.String(), dim[1]) {
						t.Fatalf("the reasoning is not dimmed: %q", out.String())
					}
				}
				if raw := rawControls(out.String(), own...); len(raw) > 0 {
					t.Fatalf("raw in the output: %v\n%q", raw, out.String())
				}
				for _, want := range []string{"answer ", "thinking ", "→ shell", "← ", "error: MODEL_ERROR", "the agent asks to run rm",
					"which one? ", "» from another client"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("the output lacks %q:\n%s", want, out.String())
					}
				}
			})
		}
	}
}

// TestTranscriptShowsEscapesVisibly: a Session's history printed by chat
// and session show holds no raw escape.
func TestTranscriptShowsEscapesVisibly(t *testing.T) {
	for name, attack := range terminalAttacks {
		t.Run(name, func(t *testing.T) {
			tr := client.Transcript{Messages: []client.UIMessage{
				{ID: "in_1", Role: "user", Parts: []map[string]any{{"type": "text", "text": "hi " + attack}}},
				{ID: "msg_1", Role: "assistant", Parts: []map[string]any{
					{"type": "dynamic-tool", "toolName": "shell" + attack},
					{"type": "text", "text": "answer " + attack},
				}},
			}}
			var out strings.Builder
			printTranscript(&out, tr)
			if raw := rawControls(out.String()); len(raw) > 0 {
				t.Fatalf("raw in the output: %v\n%q", raw, out.String())
			}
			if !strings.Contains(out.String(), "you: hi ") || !strings.Contains(out.String(), "agent: [shell") {
				t.Fatalf("output %q", out.String())
			}
		})
	}
}

// TestOutputsShowEscapesVisibly: the JSON the CLI prints (session show,
// sandbox get, ...) and the errors it prints, the server's answers among
// them, hold no raw escape.
func TestOutputsShowEscapesVisibly(t *testing.T) {
	for name, attack := range terminalAttacks {
		t.Run(name, func(t *testing.T) {
			var out strings.Builder
			tr := client.Transcript{Messages: []client.UIMessage{{ID: "msg_1", Role: "assistant",
				Parts: []map[string]any{{"type": "text", "text": attack}}}}}
			if err := printJSON(&out, tr); err != nil {
				t.Fatal(err)
			}
			var back client.Transcript
			if err := json.Unmarshal([]byte(out.String()), &back); err != nil || back.Messages[0].Text() != attack {
				t.Fatalf("printed %q: %v", out.String(), err)
			}
			if raw := rawControls(out.String()); len(raw) > 0 {
				t.Fatalf("raw in the JSON: %v\n%q", raw, out.String())
			}
			for _, body := range []string{jsonString(t, map[string]string{"code": "SANDBOX_FAILED", "message": "the box said " + attack}),
				"not JSON " + attack} {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					w.WriteHeader(http.StatusBadGateway)
					_, _ = io.WriteString(w, body)
				}))
				var stdout, stderr strings.Builder
				code := Main(context.Background(), []string{"sandbox", "get", "--server", srv.URL, "--api-key", "k", "sbx_1"},
					IO{Stdin: strings.NewReader(""), Stdout: &stdout, Stderr: &stderr}, func(string) string { return "" })
				srv.Close()
				if code != 1 || !strings.Contains(stderr.String(), "astrabox sandbox: ") {
					t.Fatalf("exit %d, stderr %q", code, stderr.String())
				}
				if raw := rawControls(stderr.String()); len(raw) > 0 {
					t.Fatalf("raw in the error: %v\n%q", raw, stderr.String())
				}
			}
		})
	}
}

func jsonString(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
