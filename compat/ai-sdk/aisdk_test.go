// Package aisdk_test proves that AstraBox's agent stream
// (GET /api/v1/sessions/{id}/ai-stream) is read by the real Vercel AI SDK:
// npm package ai, pinned in package-lock.json and installed with npm ci.
// It starts a whole server (servertest: process backend, scripted fake
// model), opens a session, then runs aisdk.test.mjs with node --test,
// where every stream goes through the SDK's own parser —
// parseJsonEventStream with uiMessageChunkSchema into readUIMessageStream —
// and through DefaultChatTransport.reconnectToStream for resume. Node's
// TAP summary must count every test passed; node also writes what it saw
// to a JSON file, which this test checks against the server's log and its
// /messages view (AISDK_SHOW_RESULTS=1 logs that file; a failure always
// does).
//
// It needs node and npm; outside CI it skips without them.
package aisdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/nodetest"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// What the fake model answers, by tag: a user message carries its reply's
// tag; the model first calls a tool and, once it has the tool's result,
// answers with text.
const (
	tagLive   = "[live]"
	tagResume = "[resume]"

	liveCommand = "echo live-tool-output"
	liveText    = "The command printed live-tool-output, as asked."
	resumePath  = "notes/resume.txt"
	resumeBody  = "written before the hold\n"
	resumeText  = "Resumed text arrives in pieces after the gate opens."
)

// nodeTests is how many tests aisdk.test.mjs holds; the run must pass all.
const nodeTests = 5

// script returns the fake model's replies: a router played for every
// request, so that what the model answers depends on the conversation, not
// on how many requests came before. The resume reply's text is held after
// its first piece until gate is closed.
func script(gate <-chan struct{}) []fakemodel.Reply {
	route := fakemodel.Func(func(req fakemodel.Request) fakemodel.Reply {
		afterTool := req.Last().Role == "tool"
		var last string // the last user message
		for _, m := range req.Body.Messages {
			if m.Role == "user" {
				last = m.Content
			}
		}
		switch {
		case strings.Contains(last, tagLive) && !afterTool:
			return fakemodel.Call("shell", map[string]any{"command": liveCommand}).WithDelay(10 * time.Millisecond)
		case strings.Contains(last, tagLive):
			return fakemodel.Text(liveText).WithDelay(10 * time.Millisecond)
		case strings.Contains(last, tagResume) && !afterTool:
			return fakemodel.Call("write_file", map[string]any{"path": resumePath, "content": resumeBody})
		case strings.Contains(last, tagResume):
			return fakemodel.Text(resumeText).HoldUntil(gate)
		}
		return fakemodel.Text(fakemodel.Exhausted)
	})
	return slices.Repeat([]fakemodel.Reply{route}, 20)
}

// results is what aisdk.test.mjs records (see the results object there).
type results struct {
	Live struct {
		InputID          string     `json:"inputId"`
		TurnID           string     `json:"turnId"`
		StartMessageID   string     `json:"startMessageId"`
		Message          uiMessage  `json:"message"`
		Snapshots        int        `json:"snapshots"`
		SawInputOnly     bool       `json:"sawInputOnly"`
		SawTextStreaming bool       `json:"sawTextStreaming"`
		Errors           []string   `json:"errors"`
		Headers          httpHeader `json:"headers"`
		Tail             []rawEvent `json:"tail"`
	} `json:"live"`
	Replay struct {
		AfterSeq   int64      `json:"afterSeq"`
		FirstTypes []string   `json:"firstTypes"`
		Message    uiMessage  `json:"message"`
		Errors     []string   `json:"errors"`
		Headers    httpHeader `json:"headers"`
		Tail       []rawEvent `json:"tail"`
	} `json:"replay"`
	LiveEnded nothingToResume `json:"liveEnded"`
	Resume    struct {
		InputID       string     `json:"inputId"`
		TurnID        string     `json:"turnId"`
		StartSeq      int64      `json:"startSeq"`
		AfterSeq      int64      `json:"afterSeq"`
		FirstID       string     `json:"firstId"`
		FirstTypes    []string   `json:"firstTypes"`
		HeldText      string     `json:"heldText"`
		StartMetadata *metadata  `json:"startMetadata"`
		Message       uiMessage  `json:"message"`
		Transport     uiMessage  `json:"transportMessage"`
		Errors        []string   `json:"errors"`
		Headers       httpHeader `json:"headers"`
		Tail          []rawEvent `json:"tail"`
	} `json:"resume"`
	ResumeEnded nothingToResume `json:"resumeEnded"`
}

// nothingToResume is what after_seq at a reply's end answered.
type nothingToResume struct {
	AfterSeq      int64 `json:"afterSeq"`
	Status        int   `json:"status"`
	BodyLength    int   `json:"bodyLength"`
	TransportNull bool  `json:"transportNull"`
}

// uiMessage is the part of an AI SDK UIMessage the checks read.
type uiMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata *metadata        `json:"metadata"`
	Parts    []map[string]any `json:"parts"`
}

// metadata is the start frame's messageMetadata.
type metadata struct {
	TurnID  string `json:"turn_id"`
	InputID string `json:"input_id"`
}

// httpHeader is a response's headers as node saw them (lower-case names).
type httpHeader map[string]string

// rawEvent is one SSE event as it crossed the wire: its id line ("" when
// it had none) and its data.
type rawEvent struct {
	ID   string          `json:"id"`
	Data json.RawMessage `json:"data"`
}

// TestAISDKReadsAgentStream runs aisdk.test.mjs against a live server and
// checks what the SDK folded against the server's own log and messages.
//
// Everything happens on one session: the process backend runs every box
// in the host's network namespace, where the model tunnel's fixed address
// (runner.ModelListen) fits one live runtime at a time.
func TestAISDKReadsAgentStream(t *testing.T) {
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodetest.Timeout(t, 8*time.Minute))
	defer cancel()
	nodetest.NPM(ctx, t, pkgDir, "ci", "--no-audit", "--no-fund")

	gate := make(chan struct{})
	var release sync.Once
	releaseGate := func() { release.Do(func() { close(gate) }) }
	env := servertest.New(t, servertest.Options{Script: script(gate)})
	sid := env.Session(env.Agent("auto", nil))

	// aisdk.test.mjs opens the gate once it has read the held reply.
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/release" {
			http.NotFound(w, r)
			return
		}
		releaseGate()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(ctl.Close)
	t.Cleanup(releaseGate)

	resultsFile := filepath.Join(t.TempDir(), "results.json")
	nodetest.RunTAP(ctx, t, pkgDir, "aisdk.test.mjs", nodeTests, map[string]string{
		"ASTRABOX_URL":        env.URL,
		"ASTRABOX_API_HEADER": api.HeaderAPIKey,
		"ASTRABOX_API_KEY":    servertest.Key,
		"SESSION_ID":          sid,
		"LIVE_INPUT":          tagLive + " run " + liveCommand,
		"RESUME_INPUT":        tagResume + " write " + resumePath + ", then explain",
		"RELEASE_URL":         ctl.URL + "/release",
		"AISDK_RESULTS_FILE":  resultsFile,
		"NO_COLOR":            "1",
	})

	b, err := os.ReadFile(resultsFile)
	if err != nil {
		t.Fatalf("node passed but wrote no results: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("AISDK_SHOW_RESULTS") != "" {
			t.Logf("what aisdk.test.mjs saw:\n%s", nodetest.Indent(string(b)))
		}
	})
	var res results
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatalf("results %s: %v", b, err)
	}
	evs := readEvents(ctx, t, env, sid, 0, untilTurnEnded(res.Resume.InputID))

	t.Run("live", func(t *testing.T) {
		r := res.Live
		if len(r.Errors) > 0 {
			t.Fatalf("the AI SDK reported errors: %v", r.Errors)
		}
		start := frameOf(t, evs, r.TurnID, "start")
		if want := messageIDOf(t, start); r.StartMessageID != want || r.Message.ID != want {
			t.Errorf("message id %q, start frame's messageId %q; the log's start frame says %q", r.Message.ID, r.StartMessageID, want)
		}
		if r.Message.ID != "msg_"+r.InputID {
			t.Errorf("message id %q, want msg_%s (stable per input)", r.Message.ID, r.InputID)
		}
		if r.Message.Metadata == nil || r.Message.Metadata.TurnID != r.TurnID || r.Message.Metadata.InputID != r.InputID {
			t.Errorf("message metadata %+v, want turn %s input %s", r.Message.Metadata, r.TurnID, r.InputID)
		}
		if got := texts(r.Message); got != liveText {
			t.Errorf("text parts %q, want %q", got, liveText)
		}
		tool := onlyTool(t, r.Message)
		if tool["toolName"] != "shell" || tool["state"] != "output-available" {
			t.Errorf("tool part %v, want a shell call with its output", tool)
		}
		if in, _ := tool["input"].(map[string]any); in["command"] != liveCommand {
			t.Errorf("tool input %v, want command %q", tool["input"], liveCommand)
		}
		if out, _ := tool["output"].(map[string]any); !strings.Contains(fmt.Sprint(out["stdout"]), "live-tool-output") {
			t.Errorf("tool output %v, want the command's stdout", tool["output"])
		}
		if !r.SawInputOnly || !r.SawTextStreaming || r.Snapshots < 5 {
			t.Errorf("the message was not folded as it streamed: %d snapshots, tool input before output %v, text while streaming %v",
				r.Snapshots, r.SawInputOnly, r.SawTextStreaming)
		}
		sameAsServer(t, env, sid, r.Message)
		checkTail(t, "live stream", r.Tail, frameOf(t, evs, r.TurnID, "finish").Seq, r.TurnID)
		checkHeaders(t, "live stream", r.Headers)
	})

	t.Run("replay-ended-reply", func(t *testing.T) {
		r := res.Replay
		if len(r.Errors) > 0 {
			t.Fatalf("the AI SDK reported errors: %v", r.Errors)
		}
		if d := frameOf(t, evs, res.Live.TurnID, "text-delta"); r.AfterSeq != d.Seq {
			t.Errorf("replayed after %d, want the first text-delta %d", r.AfterSeq, d.Seq)
		}
		if !slices.Equal(r.FirstTypes, []string{"data-turn-accepted", "start"}) {
			t.Errorf("the replay opens with %v, want [data-turn-accepted start]", r.FirstTypes)
		}
		if r.Message.ID != res.Live.Message.ID || texts(r.Message) != liveText {
			t.Errorf("replayed message %s with text %q, want %s with %q", r.Message.ID, texts(r.Message), res.Live.Message.ID, liveText)
		}
		checkTail(t, "replayed stream", r.Tail, frameOf(t, evs, res.Live.TurnID, "finish").Seq, res.Live.TurnID)
		checkHeaders(t, "replayed stream", r.Headers)
	})

	t.Run("resume-after-end", func(t *testing.T) {
		checkNothing(t, "the live reply", res.LiveEnded, frameOf(t, evs, res.Live.TurnID, "finish").Seq)
		checkNothing(t, "the resumed reply", res.ResumeEnded, frameOf(t, evs, res.Resume.TurnID, "finish").Seq)
	})

	t.Run("resume-mid-reply", func(t *testing.T) {
		r := res.Resume
		if len(r.Errors) > 0 {
			t.Fatalf("the AI SDK reported errors: %v", r.Errors)
		}
		first := firstFrame(t, evs, r.TurnID)
		held := frameOf(t, evs, r.TurnID, "text-delta")
		if r.StartSeq != first.Seq || r.AfterSeq != held.Seq || r.AfterSeq <= r.StartSeq {
			t.Fatalf("resumed after %d with the reply starting at %d; the log has the first delta at %d and the reply's first frame at %d",
				r.AfterSeq, r.StartSeq, held.Seq, first.Seq)
		}
		if r.FirstID != strconv.FormatInt(first.Seq, 10) || !slices.Equal(r.FirstTypes, []string{"data-turn-accepted", "start"}) {
			t.Errorf("the resumed stream opens with id %s %v, want id %d [data-turn-accepted start]", r.FirstID, r.FirstTypes, first.Seq)
		}
		if r.HeldText != textOf(t, held) || !strings.HasPrefix(resumeText, r.HeldText) || r.HeldText == resumeText {
			t.Errorf("text while held %q, want the first piece %q of %q", r.HeldText, textOf(t, held), resumeText)
		}
		if r.StartMetadata == nil || r.StartMetadata.TurnID != r.TurnID || r.StartMetadata.InputID != r.InputID {
			t.Errorf("start metadata %+v, want turn %s input %s", r.StartMetadata, r.TurnID, r.InputID)
		}
		want := "msg_" + r.InputID
		for name, m := range map[string]uiMessage{"parser": r.Message, "transport": r.Transport} {
			if m.ID != want || texts(m) != resumeText {
				t.Errorf("%s: message %s with text %q, want %s with %q", name, m.ID, texts(m), want, resumeText)
			}
			tool := onlyTool(t, m)
			if in, _ := tool["input"].(map[string]any); tool["toolName"] != "write_file" || tool["state"] != "output-available" || in["path"] != resumePath {
				t.Errorf("%s: tool part %v, want write_file of %s with its output", name, tool, resumePath)
			}
		}
		sameAsServer(t, env, sid, r.Message)
		checkTail(t, "resumed stream", r.Tail, frameOf(t, evs, r.TurnID, "finish").Seq, r.TurnID)
		checkHeaders(t, "resumed stream", r.Headers)
	})
}

// checkNothing checks that after_seq at a reply's finish frame answered
// 204 with no body, and reconnectToStream null.
func checkNothing(t *testing.T, what string, r nothingToResume, finishSeq int64) {
	t.Helper()
	if r.AfterSeq != finishSeq || r.Status != http.StatusNoContent || r.BodyLength != 0 || !r.TransportNull {
		t.Errorf("%s: after_seq=%d (finish frame %d) answered %d with %d bytes, transport null %v; want 204, empty, null",
			what, r.AfterSeq, finishSeq, r.Status, r.BodyLength, r.TransportNull)
	}
}

// checkHeaders checks the UI message stream's response headers.
func checkHeaders(t *testing.T, what string, h httpHeader) {
	t.Helper()
	if ct := h["content-type"]; !strings.HasPrefix(ct, "text/event-stream") {
		t.Errorf("%s: content-type %q", what, ct)
	}
	if v := h["x-vercel-ai-ui-message-stream"]; v != "v1" {
		t.Errorf("%s: x-vercel-ai-ui-message-stream %q, want v1", what, v)
	}
	if v := h["cache-control"]; v != "no-cache" {
		t.Errorf("%s: cache-control %q, want no-cache", what, v)
	}
}

// checkTail checks a stream's last three events: the finish frame (with
// its seq as id), the transient resume cursor without an id, and [DONE].
func checkTail(t *testing.T, what string, tail []rawEvent, finishSeq int64, turnID string) {
	t.Helper()
	if len(tail) != 3 {
		t.Fatalf("%s: tail %v, want finish, cursor, [DONE]", what, tail)
	}
	var finish struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(tail[0].Data, &finish); err != nil || finish.Type != "finish" || tail[0].ID != strconv.FormatInt(finishSeq, 10) {
		t.Errorf("%s: last frame before the cursor is id %q %s, want id %d finish", what, tail[0].ID, tail[0].Data, finishSeq)
	}
	var cursor struct {
		Type      string `json:"type"`
		Transient bool   `json:"transient"`
		Data      struct {
			FrameSeq int64  `json:"frameSeq"`
			TurnID   string `json:"turnId"`
		} `json:"data"`
	}
	if err := json.Unmarshal(tail[1].Data, &cursor); err != nil || tail[1].ID != "" || cursor.Type != "data-resume-cursor" || !cursor.Transient ||
		cursor.Data.FrameSeq != finishSeq || cursor.Data.TurnID != turnID {
		t.Errorf("%s: cursor id %q %s, want no id and a transient data-resume-cursor {frameSeq: %d, turnId: %s}", what, tail[1].ID, tail[1].Data, finishSeq, turnID)
	}
	if string(tail[2].Data) != `"[DONE]"` || tail[2].ID != "" {
		t.Errorf("%s: last event id %q %s, want data: [DONE]", what, tail[2].ID, tail[2].Data)
	}
}

// sameAsServer checks that the message the AI SDK folded is the assistant
// message the server folds at /messages, part for part, but for the
// bookkeeping parts /messages leaves out (see bookkeeping).
func sameAsServer(t *testing.T, env *servertest.Env, sid string, m uiMessage) {
	t.Helper()
	var view struct {
		Messages []uiMessage `json:"messages"`
	}
	env.Must(200, "GET", "/api/v1/sessions/"+sid+"/messages", nil, &view)
	for _, s := range view.Messages {
		if s.ID != m.ID {
			continue
		}
		if s.Role != "assistant" || m.Role != "assistant" {
			t.Errorf("message %s: role %q at /messages, %q in the SDK", m.ID, s.Role, m.Role)
		}
		if got, want := comparable(m), comparable(s); got != want {
			t.Errorf("message %s folded by the AI SDK:\n%s\nat /messages:\n%s", m.ID, got, want)
		}
		return
	}
	t.Errorf("/messages has no message %s: %+v", m.ID, view.Messages)
}

// bookkeeping are the data parts of a reply that record the input's
// progress: the SDK keeps data-input-consumed as a part of the message
// (data-turn-accepted, sent before start, is dropped when start resets
// the message), while /messages shows neither.
var bookkeeping = []string{"data-turn-accepted", "data-input-consumed"}

// comparable renders a message's parts, less the bookkeeping ones, as
// JSON.
func comparable(m uiMessage) string {
	var parts []map[string]any
	for _, p := range m.Parts {
		if !slices.Contains(bookkeeping, fmt.Sprint(p["type"])) {
			parts = append(parts, p)
		}
	}
	b, _ := json.MarshalIndent(parts, "", "  ")
	return string(b)
}

// texts joins a message's text parts.
func texts(m uiMessage) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p["type"] == "text" {
			b.WriteString(fmt.Sprint(p["text"]))
		}
	}
	return b.String()
}

// onlyTool returns a message's one tool part, which must be dynamic.
func onlyTool(t *testing.T, m uiMessage) map[string]any {
	t.Helper()
	var tools []map[string]any
	for _, p := range m.Parts {
		if typ := fmt.Sprint(p["type"]); typ == "dynamic-tool" || strings.HasPrefix(typ, "tool-") {
			tools = append(tools, p)
		}
	}
	if len(tools) != 1 || tools[0]["type"] != "dynamic-tool" {
		t.Fatalf("message %s has tool parts %v, want one dynamic-tool part", m.ID, tools)
	}
	return tools[0]
}

// logEvent is one event of the raw /events stream.
type logEvent struct {
	Seq     int64           `json:"seq"`
	Type    string          `json:"type"`
	TurnID  string          `json:"turn_id"`
	InputID string          `json:"input_id"`
	Payload json.RawMessage `json:"payload"`
}
