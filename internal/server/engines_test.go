package server_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// engineCase is one engine kind under the adapter conformance suite.
type engineCase struct {
	kind string
	// rootfs returns the image tarball the kind's program needs ("" for
	// the backend's default image).
	rootfs func(t *testing.T) string
	// shellTool is the program's shell tool; shell is the model's call of
	// it.
	shellTool string
	shell     func(command string) fakemodel.Reply
}

var engineCases = []engineCase{
	{kind: "astrabox", rootfs: func(*testing.T) string { return "" }, shellTool: "shell",
		shell: func(c string) fakemodel.Reply { return fakemodel.Call("shell", map[string]any{"command": c}) }},
	{kind: "pi", rootfs: piRootfs, shellTool: "bash",
		shell: func(c string) fakemodel.Reply { return fakemodel.Call("bash", map[string]any{"command": c}) }},
}

// piRootfs is the pi image's rootfs tarball (make dist/pi-rootfs.tar.gz).
func piRootfs(t *testing.T) string {
	p := os.Getenv("ASTRABOX_TEST_PI_ROOTFS")
	testenv.Need(t, p != "", "the pi image's rootfs tarball (ASTRABOX_TEST_PI_ROOTFS; make dist/pi-rootfs.tar.gz)")
	return p
}

// TestEngineConformance runs every engine kind's program through the same
// conversation on native and docker against the fake model: two inputs
// sent back to back, a tool call, an interrupt, a server restart during a
// tool call (the new server re-attaches by byte offset), and the loss of
// the sandbox, after which the program resumes from its native state with
// the whole history in its next model request.
func TestEngineConformance(t *testing.T) {
	for _, ec := range engineCases {
		for _, backend := range []string{"native", "docker"} {
			t.Run(ec.kind+"/"+backend, func(t *testing.T) { engineConformance(t, ec, backend) })
		}
	}
}

func engineConformance(t *testing.T, ec engineCase, backend string) {
	gate := make(chan struct{})
	t.Cleanup(func() { close(gate) })
	script := []fakemodel.Reply{
		fakemodel.Text("the word is kiwi"),
		ec.shell("echo hi > note.txt && cat note.txt"),
		fakemodel.Text("Ran it."),
		fakemodel.Text("this is never finished").HoldUntil(gate),
		ec.shell("sleep 2; echo slept"),
		fakemodel.Text("done after the sleep"),
		fakemodel.Text("you said kiwi"),
	}
	e := servertest.New(t, servertest.Options{Backend: backend, Script: script, Rootfs: ec.rootfs(t)})
	h := &harness{Env: e, t: t, model: e.Model}
	var engines struct {
		Items []struct {
			Kind   string          `json:"kind"`
			Images map[string]bool `json:"images"`
		} `json:"items"`
	}
	h.must(200, "GET", "/api/v1/engines", nil, &engines)
	listed := false
	for _, it := range engines.Items {
		listed = listed || (it.Kind == ec.kind && it.Images[backend])
	}
	if !listed {
		t.Fatalf("GET /api/v1/engines does not offer %s on %s: %+v", ec.kind, backend, engines.Items)
	}
	sid := h.session(h.AgentOf(ec.kind, "auto", nil))

	// Two inputs back to back: answered once each, in order.
	rc1 := h.send(sid, "remember kiwi", "")
	rc2 := h.send(sid, "write a note and show it", "")
	evs := h.events(sid, 0, untilTurnEnded(rc2.InputID))
	if got := replyText(evs, rc1.InputID); got != "the word is kiwi" {
		t.Fatalf("first reply %q: %s", got, summarize(evs))
	}
	if got := replyText(evs, rc2.InputID); got != "Ran it." {
		t.Fatalf("second reply %q", got)
	}
	var started []string
	for _, e := range evs {
		if e.Type == "turn.started" {
			started = append(started, e.InputID)
		}
	}
	if strings.Join(started, " ") != rc1.InputID+" "+rc2.InputID {
		t.Fatalf("replies started %v, want %s then %s", started, rc1.InputID, rc2.InputID)
	}
	toolOutput := ""
	for _, f := range frames(evs) {
		if f["type"] == "tool-output-available" && f["preliminary"] != true {
			b, _ := json.Marshal(f["output"])
			toolOutput = string(b)
		}
	}
	if !strings.Contains(toolOutput, "hi") {
		t.Fatalf("the tool call's output %q lacks the file's content", toolOutput)
	}
	h.waitState(sid, "READY")

	// An interrupt ends the reply in progress.
	rc3 := h.send(sid, "start something long", "")
	h.events(sid, rc2.Seq, func(e logEvent) bool { return e.Type == "turn.started" && e.InputID == rc3.InputID })
	var res map[string]string
	h.must(200, "POST", "/api/v1/sessions/"+sid+"/interrupt", nil, &res)
	evs = h.events(sid, rc2.Seq, untilTurnEnded(rc3.InputID))
	if end := turnEnd(evs, rc3.InputID); end["outcome"] != "interrupted" {
		t.Fatalf("interrupted reply ended %v", end)
	}
	h.waitState(sid, "READY")

	// A server restart during a tool call: the new server re-attaches and
	// the reply completes with no frame lost or repeated.
	rc4 := h.send(sid, "sleep a little", "")
	h.events(sid, rc3.Seq, func(e logEvent) bool { return e.Type == "tool-input-available" && e.InputID == rc4.InputID })
	h.restart()
	evs = h.events(sid, 0, untilTurnEnded(rc4.InputID))
	checkGapFree(t, evs, 1)
	counts := map[string]int{}
	for _, e := range evs {
		if e.InputID == rc4.InputID && !strings.Contains(e.Type, ".") {
			counts[e.Type]++
		}
	}
	for typ, want := range map[string]int{"start": 1, "tool-input-available": 1, "finish": 1} {
		if counts[typ] != want {
			t.Errorf("%d %s frames across the restart, want %d: %v", counts[typ], typ, want, counts)
		}
	}
	if got := replyText(evs, rc4.InputID); got != "done after the sleep" {
		t.Fatalf("reply across the restart %q", got)
	}
	sess := h.waitState(sid, "READY")

	// The sandbox is lost: the next input rebuilds the runtime from the
	// native state, and the program sends the whole conversation.
	h.must(204, "DELETE", "/v1/sandboxes/"+sess["sandbox_id"].(string), nil, nil)
	h.waitState(sid, "RECOVERY_REQUIRED")
	rc5 := h.send(sid, "what was the word?", "")
	evs = h.events(sid, rc4.Seq, untilTurnEnded(rc5.InputID))
	if got := replyText(evs, rc5.InputID); got != "you said kiwi" {
		t.Fatalf("reply after the loss %q: %s", got, summarize(evs))
	}
	reqs := h.model.Requests()
	if first := reqs[0]; !slices.Contains(first.ToolNames(), ec.shellTool) || !strings.Contains(first.Transcript(), "Be brief.") {
		t.Errorf("the first model request is not %s's with the Agent's instructions: tools %v\n%s", ec.kind, first.ToolNames(), first.Transcript())
	}
	last := reqs[len(reqs)-1].Transcript()
	for _, want := range []string{"remember kiwi", "the word is kiwi", "write a note and show it", "Ran it.", "done after the sleep", "what was the word?"} {
		if !strings.Contains(last, want) {
			t.Errorf("the resumed program's model request lacks %q:\n%s", want, last)
		}
	}
	if strings.Contains(last, servertest.ModelKey) {
		t.Error("the real model key reached the box's request")
	}
}

// turnEnd returns the payload of an input's turn.ended.
func turnEnd(evs []logEvent, inputID string) map[string]any {
	for _, e := range evs {
		if e.Type == "turn.ended" && e.InputID == inputID {
			var m map[string]any
			_ = json.Unmarshal(e.Payload, &m)
			return m
		}
	}
	return nil
}

// TestEnginesNeedTheirImage: an engine kind whose image no backend has is
// not offered, and an Agent of it needs a profile that names an image.
func TestEnginesNeedTheirImage(t *testing.T) {
	h := newHarness(t)
	var engines struct {
		Items []struct {
			Kind string `json:"kind"`
		} `json:"items"`
	}
	h.must(200, "GET", "/api/v1/engines", nil, &engines)
	if len(engines.Items) != 1 || engines.Items[0].Kind != "astrabox" {
		t.Fatalf("engines on the process backend: %+v, want the built-in agent alone", engines.Items)
	}
	h.must(200, "PUT", "/api/v1/runtime-profiles/bare", map[string]any{"backend": "process",
		"model": map[string]any{"base_url": h.model.URL(), "api_key": "k", "models": []string{"m"}}}, nil)
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if got := h.call("POST", "/api/v1/agents", map[string]any{"name": "p", "engine_kind": "pi", "runtime_profile": "bare"}, &e); got != 400 || !strings.Contains(e.Message, "image") {
		t.Fatalf("a pi Agent on a profile without an image: %d %+v", got, e)
	}
}

// TestEngineBrokenModelStream: every engine kind's program, its model
// stream cut mid-answer by its server's stop (no grace for replies, as a
// crash), goes on by its own rule once the new server opens the model
// path again (the built-in agent: model.retry; pi: its auto-retry): the
// reply completes, its last step is the model's whole answer, and the
// model was asked twice.
func TestEngineBrokenModelStream(t *testing.T) {
	for _, ec := range engineCases {
		t.Run(ec.kind, func(t *testing.T) {
			script := []fakemodel.Reply{fakemodel.Text(longAnswer).WithDelay(15 * time.Millisecond), fakemodel.Text(longAnswer)}
			e := servertest.New(t, servertest.Options{Backend: "native", Script: script, Rootfs: ec.rootfs(t), ShutdownGrace: time.Millisecond})
			h := &harness{Env: e, t: t, model: e.Model}
			sid := h.session(h.AgentOf(ec.kind, "auto", nil))
			rc := h.send(sid, "tell me", "")
			h.waitDeltas(sid, 20)
			h.restart()
			evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
			checkWholeAnswer(t, evs, longAnswer) // pi marks no broken step: its retry shows as data-retry
			if n := len(h.model.Requests()); n != 2 {
				t.Fatalf("the model was asked %d times, want 2", n)
			}
		})
	}
}
