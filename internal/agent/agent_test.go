package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

func TestTextStreaming(t *testing.T) {
	const answer = "Hello! This answer streams in several pieces."
	model := fakemodel.New(t, fakemodel.Text(answer).WithReasoning("let me think about it").WithUsage(11, 7))
	cfg := testConfig(t, model)
	cfg.Instructions = "Always answer in English."
	h := startAgent(t, cfg)
	h.input("in_1", "say hello")
	end := h.waitEnd("in_1")
	if end.str("outcome") != outcomeCompleted || end.str("finish_reason") != "stop" {
		t.Fatalf("turn.end %v", end)
	}
	if u := end.obj("usage"); u["input_tokens"] != 11.0 || u["output_tokens"] != 7.0 {
		t.Fatalf("usage %v", u)
	}
	h.waitFor("idle", func(e event) bool { return e.typ() == "state" && e.str("state") == stateIdle })

	want := []string{"ready", "state:idle", "input.received", "input.consumed", "state:working", "step.start",
		"reasoning.start", "reasoning.delta", "reasoning.end", "text.start", "text.delta", "text.end",
		"step.finish", "turn.end", "state:idle"}
	if got := slices.Compact(h.types()); !slices.Equal(got, want) {
		t.Fatalf("events (deltas folded)\n got %v\nwant %v", got, want)
	}
	var text, reasoning strings.Builder
	var textIDs []string
	for _, e := range h.all() {
		switch e.typ() {
		case "text.delta":
			text.WriteString(e.str("delta"))
			textIDs = append(textIDs, e.str("id"))
		case "reasoning.delta":
			reasoning.WriteString(e.str("delta"))
		}
	}
	if text.String() != answer || reasoning.String() != "let me think about it" {
		t.Fatalf("text %q reasoning %q", text.String(), reasoning.String())
	}
	if len(textIDs) < 2 || len(slices.Compact(textIDs)) != 1 {
		t.Fatalf("want several deltas of one text part, got ids %v", textIDs)
	}

	reqs := model.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	r := reqs[0]
	if r.Header.Get("Authorization") != "Bearer "+testKey || r.Body.Model != "test-model" || !r.Body.Stream ||
		r.Body.StreamOptions == nil || !r.Body.StreamOptions.IncludeUsage {
		t.Fatalf("request %+v headers %v", r.Body, r.Header)
	}
	if got := r.ToolNames(); !slices.Equal(got, Tools()) {
		t.Fatalf("tools %v", got)
	}
	sys := r.Body.Messages[0]
	if sys.Role != roleSystem || !strings.Contains(sys.Content, cfg.Workspace) || !strings.Contains(sys.Content, "Always answer in English.") {
		t.Fatalf("system prompt %q", sys.Content)
	}
	if got := r.Transcript(); !strings.HasSuffix(got, "user: say hello\n") {
		t.Fatalf("transcript %q", got)
	}

	if err := h.finish(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// The last state.saved names the file's size.
	var saved int64
	for _, e := range h.all() {
		if e.typ() == "state.saved" {
			saved = int64(e["bytes"].(float64))
		}
	}
	fi, err := os.Stat(cfg.StatePath)
	if err != nil || fi.Size() != saved {
		t.Fatalf("state file %v (err %v), last state.saved %d", fi.Size(), err, saved)
	}
}

func TestToolsWriteAndRunAFile(t *testing.T) {
	model := fakemodel.New(t,
		fakemodel.Text("I will write the script.").AndCall(toolWriteFile, map[string]string{"path": "bin/hello.sh", "content": "echo \"hi from $(basename \"$PWD\")\"\n"}),
		fakemodel.Call(toolShell, map[string]any{"command": "bash bin/hello.sh; echo oops >&2; exit 3"}),
		fakemodel.Text("Done."),
	)
	cfg := testConfig(t, model)
	h := startAgent(t, cfg)
	h.input("in_1", "write and run a script")
	end := h.waitEnd("in_1")
	if end.str("outcome") != outcomeCompleted {
		t.Fatalf("turn.end %v\n%s", end, h.dump())
	}
	if got := readFile(t, filepath.Join(cfg.Workspace, "bin", "hello.sh")); !strings.HasPrefix(got, "echo") {
		t.Fatalf("script %q", got)
	}
	var results []map[string]any
	for _, e := range h.all() {
		if e.typ() == "tool.result" {
			results = append(results, e.obj("output"))
		}
	}
	if len(results) != 2 || results[0]["bytes_written"] == nil {
		t.Fatalf("results %v", results)
	}
	sh := results[1]
	if sh["stdout"] != "hi from workspace\n" || sh["stderr"] != "oops\n" || sh["exit_code"] != 3.0 || sh["timed_out"] != false {
		t.Fatalf("shell result %v", sh)
	}
	if n := h.count(func(e event) bool { return e.typ() == "step.start" }); n != 3 {
		t.Fatalf("%d steps", n)
	}
	for _, e := range h.all() {
		if e.typ() == "tool.call" && e.str("name") == toolShell && e.obj("input")["command"] == nil {
			t.Fatalf("tool.call without its input: %v", e)
		}
	}
	reqs := model.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests", len(reqs))
	}
	last := reqs[2].Body.Messages
	tool := last[len(last)-1]
	if tool.Role != roleTool || !strings.Contains(tool.Content, "hi from workspace") || tool.ToolCallID == "" {
		t.Fatalf("tool message %+v", tool)
	}
	assistant := last[len(last)-2]
	if assistant.Role != roleAssistant || len(assistant.ToolCalls) != 1 || assistant.ToolCalls[0].ID != tool.ToolCallID {
		t.Fatalf("assistant message %+v", assistant)
	}
	if !strings.Contains(reqs[1].Transcript(), "assistant: I will write the script.\nassistant -> write_file(") {
		t.Fatalf("transcript %q", reqs[1].Transcript())
	}
}

func TestAskMode(t *testing.T) {
	for _, tc := range []struct {
		decision, comment string
		wantFile          bool
	}{
		{decision: "approve", wantFile: true},
		{decision: "reject", comment: "not that file"},
	} {
		t.Run(tc.decision, func(t *testing.T) {
			model := fakemodel.New(t,
				fakemodel.Call(toolReadFile, map[string]string{"path": "missing.txt"}),
				fakemodel.Call(toolWriteFile, map[string]string{"path": "out.txt", "content": "x"}),
				fakemodel.Text("ok"),
			)
			cfg := testConfig(t, model)
			cfg.PermissionMode = PermissionAsk
			h := startAgent(t, cfg)
			h.input("in_1", "write out.txt")
			// read_file needs no approval: it fails at once.
			h.waitType("tool.error")
			req := h.waitType("approval.request")
			if req.str("name") != toolWriteFile || req.obj("input")["path"] != "out.txt" || req.str("tool_call_id") == "" {
				t.Fatalf("approval.request %v", req)
			}
			if slices.Index(h.types(), "state:waiting") < 0 {
				t.Fatalf("no waiting state: %v", h.types())
			}
			// An answer for another interaction is ignored.
			h.send(map[string]string{"type": "answer", "interaction_id": "int_other", "decision": "approve"})
			h.waitType("log")
			h.send(map[string]string{"type": "answer", "interaction_id": req.str("interaction_id"), "decision": tc.decision, "comment": tc.comment})
			end := h.waitEnd("in_1")
			if end.str("outcome") != outcomeCompleted {
				t.Fatalf("turn.end %v", end)
			}
			_, err := os.Stat(filepath.Join(cfg.Workspace, "out.txt"))
			if (err == nil) != tc.wantFile {
				t.Fatalf("out.txt exists: %v, want %v", err == nil, tc.wantFile)
			}
			reqs := model.Requests()
			tool := reqs[2].Last()
			switch tc.decision {
			case "approve":
				if h.count(func(e event) bool { return e.typ() == "tool.result" && e.str("id") == req.str("tool_call_id") }) != 1 {
					t.Fatalf("no tool.result:\n%s", h.dump())
				}
			case "reject":
				if h.count(func(e event) bool {
					return e.typ() == "tool.denied" && e.str("id") == req.str("tool_call_id") && strings.Contains(e.str("reason"), tc.comment)
				}) != 1 {
					t.Fatalf("no tool.denied:\n%s", h.dump())
				}
				if !strings.Contains(tool.Content, "denied") || !strings.Contains(tool.Content, tc.comment) {
					t.Fatalf("the model was not told: %q", tool.Content)
				}
			}
		})
	}
}

func TestDuplicateInputIsAnsweredOnce(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Text("one"), fakemodel.Text("two"), fakemodel.Text("three"))
	cfg := testConfig(t, model)
	h := startAgent(t, cfg)
	h.input("in_1", "first")
	h.input("in_1", "first again")
	h.input("in_2", "second")
	h.waitEnd("in_2")
	h.input("in_1", "first, later")
	h.waitFor("third receipt", func(e event) bool { return e.typ() == "input.received" && e.str("id") == "in_1" })
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}
	received := h.count(func(e event) bool { return e.typ() == "input.received" && e.str("id") == "in_1" })
	consumed := h.count(func(e event) bool { return e.typ() == "input.consumed" && e.str("id") == "in_1" })
	if received != 3 || consumed != 1 || len(model.Requests()) != 2 {
		t.Fatalf("in_1 received %d, consumed %d; %d model requests", received, consumed, len(model.Requests()))
	}
	// Answered in order.
	var order []string
	for _, e := range h.all() {
		if e.typ() == "input.consumed" {
			order = append(order, e.str("id"))
		}
	}
	if !slices.Equal(order, []string{"in_1", "in_2"}) {
		t.Fatalf("consumed %v", order)
	}

	// A restarted program knows the ids from its state file.
	h2 := startAgent(t, cfg)
	ready := h2.all()[0]
	if ready.typ() != "ready" || ready["resumed"] != true || !slices.Equal(toStrings(ready["inputs"]), []string{"in_1", "in_2"}) {
		t.Fatalf("ready %v", ready)
	}
	h2.input("in_2", "second, redelivered")
	h2.input("in_3", "third")
	h2.waitEnd("in_3")
	if n := h2.count(func(e event) bool { return e.typ() == "input.consumed" }); n != 1 {
		t.Fatalf("%d inputs consumed after the restart:\n%s", n, h2.dump())
	}
}

func TestRestartResumesTheConversation(t *testing.T) {
	model := fakemodel.New(t, fakemodel.Text("Noted: the word is banana."))
	cfg := testConfig(t, model)
	h := startAgent(t, cfg)
	convID := h.all()[0].str("conversation_id")
	if h.all()[0]["resumed"] != false || convID == "" {
		t.Fatalf("ready %v", h.all()[0])
	}
	h.input("in_1", "remember the word banana")
	h.waitEnd("in_1")
	if err := h.finish(); err != nil {
		t.Fatal(err)
	}

	model.Push(fakemodel.Func(func(r fakemodel.Request) fakemodel.Reply {
		return fakemodel.Text("You said: " + r.Body.Messages[1].Content)
	}))
	h2 := startAgent(t, cfg)
	ready := h2.all()[0]
	if ready["resumed"] != true || ready["messages"] != 2.0 || ready.str("conversation_id") != convID {
		t.Fatalf("ready %v", ready)
	}
	h2.input("in_2", "which word?")
	end := h2.waitEnd("in_2")
	if end.str("outcome") != outcomeCompleted {
		t.Fatalf("turn.end %v", end)
	}
	reqs := model.Requests()
	want := "user: remember the word banana\nassistant: Noted: the word is banana.\nuser: which word?\n"
	if got := reqs[1].Transcript(); !strings.HasSuffix(got, want) || reqs[1].Body.Messages[0].Role != roleSystem {
		t.Fatalf("resumed request\n%s\nwant it to end with\n%s", got, want)
	}
}

func toStrings(v any) []string {
	var out []string
	list, _ := v.([]any)
	for _, x := range list {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

func TestPendingApprovalEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		end     func(h *harness)
		outcome string
		want    string // the call's event
	}{
		{"by an interrupt", func(h *harness) { h.send(map[string]string{"type": "interrupt"}) }, outcomeInterrupted, "tool.error"},
		{"when stdin closes", func(h *harness) { h.stdin.Close() }, outcomeCompleted, "tool.denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := fakemodel.New(t, fakemodel.Call(toolShell, map[string]string{"command": "touch ran"}), fakemodel.Text("ok"))
			cfg := testConfig(t, model)
			cfg.PermissionMode = PermissionAsk
			h := startAgent(t, cfg)
			h.input("in_1", "run it")
			req := h.waitType("approval.request")
			tc.end(h)
			if end := h.waitEnd("in_1"); end.str("outcome") != tc.outcome {
				t.Fatalf("turn.end %v", end)
			}
			if h.count(func(e event) bool { return e.typ() == tc.want && e.str("id") == req.str("tool_call_id") }) != 1 {
				t.Fatalf("no %s for the call:\n%s", tc.want, h.dump())
			}
			if _, err := os.Stat(filepath.Join(cfg.Workspace, "ran")); err == nil {
				t.Fatal("the unapproved command ran")
			}
			if err := h.finish(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
