package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/vault"
)

// TestChatEndToEnd is the user's path: a profile with a model endpoint, an
// agent, a conversation; the agent writes and runs a file in its box, the
// reply streams in order, and a follow-up is answered knowing the first.
func TestChatEndToEnd(t *testing.T) {
	for _, backend := range []string{"process", "native", "docker"} {
		t.Run(backend, func(t *testing.T) { chatEndToEnd(t, backend) })
	}
}

func chatEndToEnd(t *testing.T, backend string) {
	h := newHarnessOn(t, backend,
		fakemodel.Call("write_file", map[string]any{"path": "fizzbuzz.py", "content": "for i in range(1, 4):\n    print('fizz' if i % 3 == 0 else i)\n"}),
		fakemodel.Call("shell", map[string]any{"command": "python3 fizzbuzz.py"}),
		fakemodel.Text("It prints 1, 2, fizz.").WithUsage(50, 7),
		fakemodel.Text("You asked for fizzbuzz."),
	)
	aid := h.agent("auto", nil)
	sid := h.session(aid)
	rc := h.send(sid, "write fizzbuzz.py and run it", "c1")
	if rc.Seq < 1 || rc.State != "accepted" || rc.ClientMessageID != "c1" {
		t.Fatalf("receipt %+v", rc)
	}
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	checkGapFree(t, evs, 1)

	fs := frames(evs)
	var types []string
	var shellOut map[string]any
	for _, f := range fs {
		types = append(types, f["type"].(string))
		if f["type"] == "tool-output-available" {
			if out, ok := f["output"].(map[string]any); ok && out["stdout"] != nil {
				shellOut = out
			}
		}
	}
	joined := strings.Join(types, ",")
	for _, want := range []string{"data-turn-accepted,start,data-input-consumed,start-step", "tool-input-start", "tool-input-available",
		"tool-output-available", "text-start", "text-delta", "text-end", "finish-step", "data-result,finish"} {
		if !strings.Contains(joined, want) {
			t.Errorf("reply frames lack %q: %s", want, joined)
		}
	}
	if !strings.HasPrefix(joined, "data-turn-accepted,start,data-input-consumed") {
		t.Errorf("reply does not open as PLATFORM.md says: %s", joined)
	}
	if shellOut == nil || !strings.Contains(shellOut["stdout"].(string), "fizz") {
		t.Fatalf("shell output %v: the file was not written and run in the box", shellOut)
	}
	if fs[1]["messageId"] != "msg_"+rc.InputID {
		t.Errorf("start messageId %v, want msg_%s", fs[1]["messageId"], rc.InputID)
	}

	// The messages view folds the log.
	var msgs struct {
		Messages []struct {
			ID    string           `json:"id"`
			Role  string           `json:"role"`
			Parts []map[string]any `json:"parts"`
		} `json:"messages"`
		LastSeq int64 `json:"last_seq"`
	}
	h.must(200, "GET", "/api/v1/sessions/"+sid+"/messages", nil, &msgs)
	if len(msgs.Messages) != 2 || msgs.Messages[0].ID != rc.InputID || msgs.Messages[1].Role != "assistant" {
		t.Fatalf("messages %+v", msgs.Messages)
	}

	// A follow-up: the model gets the whole conversation.
	rc2 := h.send(sid, "what did I ask?", "c2")
	h.events(sid, rc.Seq, untilTurnEnded(rc2.InputID))
	reqs := h.model.Requests()
	last := reqs[len(reqs)-1].Transcript()
	for _, want := range []string{"write fizzbuzz.py and run it", "It prints 1, 2, fizz.", "what did I ask?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the follow-up's model request lacks %q:\n%s", want, last)
		}
	}

	// The real key reached the model endpoint only; the box holds a
	// placeholder.
	for _, r := range reqs {
		if got := r.Header.Get("Authorization"); got != "Bearer "+realModelKey {
			t.Fatalf("model request carried %q", got)
		}
	}
	// The log is written before the records it implies.
	sess := h.waitState(sid, "READY")
	box, _ := sess["sandbox_id"].(string)
	if box == "" || sess["state"] != "READY" {
		t.Fatalf("session %v", sess)
	}
	b, _ := json.Marshal(sess)
	if strings.Contains(string(b), realModelKey) {
		t.Fatal("the session record shows the model key")
	}
	if backend != "process" { // the process harness is the host itself
		ex, err := client.New(h.URL, servertest.Key).Execd(context.Background(), box)
		if err != nil {
			t.Fatal(err)
		}
		out, err := ex.Run(context.Background(), execdwire.RunCommandRequest{Command: "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n' | grep -c ASTRABOX_MODEL_KEY; " +
			"grep -rl " + realModelKey + " /tmp /workspace /root /etc /proc/[0-9]*/environ 2>/dev/null; echo scanned"})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out.Stdout), "/") || !strings.Contains(string(out.Stdout), "scanned") || strings.HasPrefix(string(out.Stdout), "0") {
			t.Fatalf("key scan in the box: %q (want the placeholder variable present and no file holding the key)", out.Stdout)
		}
	}
	var prof map[string]any
	h.must(200, "GET", "/api/v1/runtime-profiles/test", nil, &prof)
	if b, _ := json.Marshal(prof); strings.Contains(string(b), realModelKey) || prof["api_key_set"] != true {
		t.Fatalf("profile view %s", b)
	}
}

// TestDuplicateClientMessageID: a repeated client_message_id returns the
// first receipt and is answered once.
func TestDuplicateClientMessageID(t *testing.T) {
	h := newHarness(t, fakemodel.Text("one"), fakemodel.Text("two"))
	sid := h.session(h.agent("auto", nil))
	first := h.send(sid, "hello", "same")
	var again receipt
	h.must(200, "POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": "hello", "client_message_id": "same"}, &again)
	if again.InputID != first.InputID || again.Seq != first.Seq || again.TurnID != first.TurnID {
		t.Fatalf("repeat receipt %+v, first %+v", again, first)
	}
	h.events(sid, 0, untilTurnEnded(first.InputID))
	if n := len(h.model.Requests()); n != 1 {
		t.Fatalf("the model was called %d times for one input", n)
	}
}

// TestQueuedInputs: inputs sent while busy get their own replies, in
// order, each contiguous.
func TestQueuedInputs(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, fakemodel.Text("first answer").HoldUntil(gate), fakemodel.Text("second answer"), fakemodel.Text("third answer"))
	sid := h.session(h.agent("auto", nil))
	a := h.send(sid, "one", "")
	h.waitState(sid, "BUSY")
	b := h.send(sid, "two", "")
	c := h.send(sid, "three", "")
	close(gate)
	evs := h.events(sid, 0, untilTurnEnded(c.InputID))
	checkGapFree(t, evs, 1)
	// Frames of each reply are contiguous among frames, in input order.
	var order []string
	for _, e := range evs {
		if strings.Contains(e.Type, ".") {
			continue
		}
		if len(order) == 0 || order[len(order)-1] != e.InputID {
			order = append(order, e.InputID)
		}
	}
	if strings.Join(order, ",") != strings.Join([]string{a.InputID, b.InputID, c.InputID}, ",") {
		t.Fatalf("reply order %v, want %s %s %s", order, a.InputID, b.InputID, c.InputID)
	}
}

// TestSandboxDeletedRecovers: an operator deletes the Session's sandbox;
// the Session shows RECOVERY_REQUIRED, and the next input is answered by a
// new box whose program resumed the conversation from native state.
func TestSandboxDeletedRecovers(t *testing.T) {
	h := newHarness(t, fakemodel.Text("the secret word is kiwi"), fakemodel.Text("you said kiwi"))
	sid := h.session(h.agent("auto", nil))
	rc := h.send(sid, "remember kiwi", "")
	h.events(sid, 0, untilTurnEnded(rc.InputID))
	sess := h.waitState(sid, "READY")
	box := sess["sandbox_id"].(string)
	h.must(204, "DELETE", "/v1/sandboxes/"+box, nil, nil)
	h.waitState(sid, "RECOVERY_REQUIRED")

	rc2 := h.send(sid, "what was the word?", "")
	evs := h.events(sid, rc.Seq, untilTurnEnded(rc2.InputID))
	var outcome map[string]any
	for _, e := range evs {
		if e.Type == "turn.ended" && e.InputID == rc2.InputID {
			_ = json.Unmarshal(e.Payload, &outcome)
		}
	}
	if outcome["outcome"] != "completed" {
		t.Fatalf("recovered reply ended %v", outcome)
	}
	sess = h.waitState(sid, "READY")
	if sess["sandbox_id"] == box || sess["sandbox_id"] == nil {
		t.Fatalf("no new sandbox: %v (old %s)", sess["sandbox_id"], box)
	}
	reqs := h.model.Requests()
	if len(reqs) != 2 {
		t.Fatalf("model called %d times", len(reqs))
	}
	if tr := reqs[1].Transcript(); !strings.Contains(tr, "remember kiwi") || !strings.Contains(tr, "the secret word is kiwi") {
		t.Fatalf("the replacement program did not resume the conversation; it sent:\n%s", tr)
	}
}

// TestSandboxLostMidReply: the box goes away while a reply streams; the
// reply ends failed with SANDBOX_GONE and the input is never sent again.
func TestSandboxLostMidReply(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, fakemodel.Text("never finished").HoldUntil(gate), fakemodel.Text("fresh start"))
	t.Cleanup(func() { close(gate) })
	sid := h.session(h.agent("auto", nil))
	rc := h.send(sid, "a long task", "")
	sess := h.waitState(sid, "BUSY")
	h.must(204, "DELETE", "/v1/sandboxes/"+sess["sandbox_id"].(string), nil, nil)
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	fs := frames(evs)
	if len(fs) < 2 || fs[len(fs)-2]["type"] != "data-turn-failure" || fs[len(fs)-1]["finishReason"] != "error" {
		t.Fatalf("the lost reply did not end failed: %v", fs)
	}
	if data := fs[len(fs)-2]["data"].(map[string]any); data["code"] != "SANDBOX_GONE" {
		t.Fatalf("failure %v", data)
	}
	h.waitState(sid, "RECOVERY_REQUIRED")
	rc2 := h.send(sid, "again", "")
	h.events(sid, 0, untilTurnEnded(rc2.InputID))
	for _, r := range h.model.Requests()[1:] {
		if strings.Count(r.Transcript(), "a long task") > 1 {
			t.Fatalf("the consumed input was sent again:\n%s", r.Transcript())
		}
	}
}

// TestRestartReattaches: the server stops while the agent runs a tool,
// and a new one on the same store re-attaches to the running program by
// byte offset; the reply completes through the new server's model path,
// and the log stays gap-free with no frame lost or repeated.
func TestRestartReattaches(t *testing.T) {
	h := newHarness(t, fakemodel.Call("shell", map[string]any{"command": "sleep 2; echo slept"}), fakemodel.Text("done after the sleep"))
	sid := h.session(h.agent("auto", nil))
	rc := h.send(sid, "go", "")
	h.events(sid, 0, func(e logEvent) bool { return e.Type == "tool-input-available" })
	h.restart()
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	checkGapFree(t, evs, 1)
	counts := map[string]int{}
	var text strings.Builder
	for _, f := range frames(evs) {
		counts[f["type"].(string)]++
		if f["type"] == "text-delta" {
			text.WriteString(f["delta"].(string))
		}
	}
	for typ, want := range map[string]int{"start": 1, "data-input-consumed": 1, "tool-input-available": 1, "tool-output-available": 1, "finish": 1, "start-step": 2} {
		if counts[typ] != want {
			t.Errorf("%d %s frames across the restart, want %d: %v", counts[typ], typ, want, counts)
		}
	}
	if text.String() != "done after the sleep" {
		t.Fatalf("text %q", text.String())
	}
	h.waitState(sid, "READY")
}

// TestApproval: permission mode ask stops at shell until it is approved,
// and a rejected call is reported denied.
func TestApproval(t *testing.T) {
	h := newHarness(t,
		fakemodel.Call("shell", map[string]any{"command": "echo approved-ran"}),
		fakemodel.Text("ran it"),
		fakemodel.Call("shell", map[string]any{"command": "echo should-not-run"}),
		fakemodel.Text("ok, not running it"),
	)
	sid := h.session(h.agent("ask", nil))
	for _, tc := range []struct {
		decision string
		want     string
	}{{"approve", "tool-output-available"}, {"reject", "tool-output-denied"}} {
		rc := h.send(sid, "run it", "")
		evs := h.events(sid, 0, func(e logEvent) bool { return e.Type == "interaction.opened" && e.InputID == rc.InputID })
		var opened struct {
			Interaction struct {
				ID string `json:"interaction_id"`
			} `json:"interaction"`
		}
		_ = json.Unmarshal(evs[len(evs)-1].Payload, &opened)
		sess := h.waitState(sid, "BUSY")
		for sess["pending_interaction"] == nil {
			h.must(200, "GET", "/api/v1/sessions/"+sid, nil, &sess)
		}
		h.must(409, "POST", "/api/v1/sessions/"+sid+"/interaction-respond", map[string]any{"interaction_id": "nope", "answer": map[string]any{"decision": "approve"}}, nil)
		h.must(200, "POST", "/api/v1/sessions/"+sid+"/interaction-respond", map[string]any{"interaction_id": opened.Interaction.ID,
			"answer": map[string]any{"decision": tc.decision}}, nil)
		evs = h.events(sid, rc.Seq, untilTurnEnded(rc.InputID))
		found := false
		for _, f := range frames(evs) {
			found = found || f["type"] == tc.want
			if tc.decision == "reject" && f["type"] == "tool-output-available" {
				t.Fatalf("a rejected call ran: %v", f)
			}
		}
		if !found {
			t.Fatalf("%s: no %s frame in %s", tc.decision, tc.want, summarize(evs))
		}
		h.waitState(sid, "READY")
	}
}

// TestInterrupt stops a streaming reply; the next input is answered.
func TestInterrupt(t *testing.T) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	h := newHarness(t, fakemodel.Text("this never completes").HoldUntil(gate), fakemodel.Text("after the interrupt"))
	sid := h.session(h.agent("auto", nil))
	var noop map[string]string
	h.must(200, "POST", "/api/v1/sessions/"+sid+"/interrupt", nil, &noop)
	if noop["status"] != "noop" {
		t.Fatalf("interrupt without a reply: %v", noop)
	}
	rc := h.send(sid, "start", "")
	h.events(sid, 0, func(e logEvent) bool { return e.Type == "turn.started" })
	var res map[string]string
	h.must(200, "POST", "/api/v1/sessions/"+sid+"/interrupt", nil, &res)
	if res["status"] != "accepted" {
		t.Fatalf("interrupt: %v", res)
	}
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	var end map[string]any
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &end)
	if end["outcome"] != "interrupted" {
		t.Fatalf("turn ended %v", end)
	}
	h.waitState(sid, "READY")
	rc2 := h.send(sid, "next", "")
	h.events(sid, 0, untilTurnEnded(rc2.InputID))
}

// TestIdleRelease: past the profile's idle timeout the sandbox is
// released (TERMINATED); the next input re-creates it with the
// conversation restored.
func TestIdleRelease(t *testing.T) {
	h := newHarness(t, fakemodel.Text("noted: mango"), fakemodel.Text("it was mango"))
	sid := h.session(h.agent("auto", map[string]any{"idleTimeout": 1}))
	rc := h.send(sid, "remember mango", "")
	h.events(sid, 0, untilTurnEnded(rc.InputID))
	first := h.waitState(sid, "READY")["sandbox_id"].(string)
	sess := h.waitState(sid, "TERMINATED")
	if sess["sandbox_id"] != nil {
		t.Fatalf("terminated session still names sandbox %v", sess["sandbox_id"])
	}
	if code := h.call("GET", "/v1/sandboxes/"+first, nil, nil); code != 404 {
		var box map[string]any
		h.call("GET", "/v1/sandboxes/"+first, nil, &box)
		if box["status"].(map[string]any)["state"] != "Terminated" {
			t.Fatalf("idle sandbox still there: %v", box)
		}
	}
	rc2 := h.send(sid, "which fruit?", "")
	h.events(sid, rc.Seq, untilTurnEnded(rc2.InputID))
	if tr := h.model.Requests()[1].Transcript(); !strings.Contains(tr, "remember mango") {
		t.Fatalf("re-created runtime lost the conversation:\n%s", tr)
	}
}

// TestConcurrentSessions: several Sessions of one agent run at once, each
// with its own box and model path.
func TestConcurrentSessions(t *testing.T) {
	echo := fakemodel.Func(func(r fakemodel.Request) fakemodel.Reply { return fakemodel.Text("echo: " + r.Last().Content) })
	h := newHarness(t, echo, echo, echo)
	aid := h.agent("auto", nil)
	sids := []string{h.session(aid), h.session(aid), h.session(aid)}
	rcs := make([]receipt, len(sids))
	for i, sid := range sids {
		rcs[i] = h.send(sid, "hello "+sid, "")
	}
	for i, sid := range sids {
		var text strings.Builder
		for _, f := range frames(h.events(sid, 0, untilTurnEnded(rcs[i].InputID))) {
			if f["type"] == "text-delta" {
				text.WriteString(f["delta"].(string))
			}
		}
		if text.String() != "echo: hello "+sid {
			t.Errorf("session %s answered %q", sid, text.String())
		}
	}
}

// TestModelKeyRotation: after a new master key is put first, a restarted
// server re-seals the stored model key under it, and the old key can go.
func TestModelKeyRotation(t *testing.T) {
	h := newHarness(t, fakemodel.Text("one"), fakemodel.Text("two"))
	sid := h.session(h.agent("auto", nil))
	rc := h.send(sid, "hi", "")
	h.events(sid, 0, untilTurnEnded(rc.InputID))
	h.waitState(sid, "READY")

	newKey := make([]byte, 32)
	newKey[0] = 7
	rotated, err := vault.New(newKey, h.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Ring = rotated
	h.restart()
	p, err := h.Store.GetProfile(context.Background(), "test")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(p.JSON), realModelKey) {
		t.Fatal("the stored profile holds the key in the clear")
	}
	var prof struct {
		Model struct {
			SealedKey string `json:"api_key_sealed"`
		} `json:"model"`
	}
	_ = json.Unmarshal(p.JSON, &prof)
	if rotated.NeedsReseal(prof.Model.SealedKey) {
		t.Fatal("the model key was not re-sealed under the newest master key")
	}
	only, _ := vault.New(newKey)
	h.Ring = only
	h.restart()
	rc2 := h.send(sid, "again", "")
	evs := h.events(sid, rc.Seq, untilTurnEnded(rc2.InputID))
	var end map[string]any
	_ = json.Unmarshal(evs[len(evs)-1].Payload, &end)
	if end["outcome"] != "completed" {
		t.Fatalf("after dropping the old key the reply ended %v", end)
	}
}
