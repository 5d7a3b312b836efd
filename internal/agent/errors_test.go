package agent

import (
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/fakemodel"
)

func TestModelFailuresEndTheTurn(t *testing.T) {
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := "http://" + closed.Addr().String() + "/v1"
	closed.Close()

	for _, tc := range []struct {
		name      string
		reply     fakemodel.Reply
		key       string // the server's required key
		url       string // instead of the server's
		code      string
		wantInMsg string
	}{
		{name: "http error", reply: fakemodel.Status(500, `{"error":{"message":"the model is on fire"}}`), code: codeModelError, wantInMsg: "HTTP 500: the model is on fire"},
		{name: "text error body", reply: fakemodel.Status(502, "bad gateway"), code: codeModelError, wantInMsg: "HTTP 502: bad gateway"},
		{name: "wrong key", key: "another-key", code: codeModelError, wantInMsg: "HTTP 401: fakemodel: invalid API key (the model endpoint refused the key"},
		{name: "echoed credential", reply: fakemodel.Func(func(r fakemodel.Request) fakemodel.Reply {
			return fakemodel.Status(400, `{"error":{"message":"rejected `+r.Header.Get("Authorization")+`"}}`)
		}), code: codeModelError, wantInMsg: "rejected Bearer [redacted]"},
		{name: "malformed chunk", reply: fakemodel.Raw("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: {not json\n\n"), code: codeModelError, wantInMsg: "malformed"},
		{name: "stream cut off", reply: fakemodel.Raw("data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n"), code: codeModelError, wantInMsg: "ended before"},
		{name: "error in stream", reply: fakemodel.Raw("data: {\"error\":{\"message\":\"overloaded\"}}\n\n"), code: codeModelError, wantInMsg: "overloaded"},
		{name: "unreachable", url: unreachable, code: codeModelUnreachable, wantInMsg: "unreachable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := fakemodel.New(t, tc.reply, fakemodel.Text("recovered"))
			if tc.key != "" {
				model.WithKey(tc.key)
			}
			cfg := testConfig(t, model)
			cfg.ConnectAttempts = 2 // one retry, then the error
			cfg.BrokenRetries = -1  // a broken call is not made again (TestBrokenModelCallIsMadeAgain)
			if tc.url != "" {
				cfg.ModelURL = tc.url
			}
			h := startAgent(t, cfg)
			h.input("in_1", "hello")
			end := h.waitEnd("in_1")
			e := end.obj("error")
			if end.str("outcome") != outcomeFailed || end.str("finish_reason") != finishError || e["code"] != tc.code {
				t.Fatalf("turn.end %v", end)
			}
			msg, _ := e["message"].(string)
			if !strings.Contains(msg, tc.wantInMsg) {
				t.Fatalf("message %q does not say %q", msg, tc.wantInMsg)
			}
			if err := h.finish(); err != nil {
				t.Fatal(err)
			}
			for _, where := range []string{h.dump(), readFile(t, cfg.StatePath)} {
				if strings.Contains(where, testKey) {
					t.Fatalf("the credential leaked:\n%s", where)
				}
			}
			// The history stays valid: a later reply sees the failed one
			// closed by a note.
			if tc.url != "" || tc.key != "" {
				return
			}
			h2 := startAgent(t, cfg)
			h2.input("in_2", "again")
			if end := h2.waitEnd("in_2"); end.str("outcome") != outcomeCompleted {
				t.Fatalf("turn.end after the failure %v", end)
			}
			reqs := model.Requests()
			msgs := reqs[len(reqs)-1].Body.Messages
			if n := len(msgs); msgs[n-2].Role != roleAssistant || msgs[n-3].Role != roleUser {
				t.Fatalf("history after the failure:\n%s", reqs[len(reqs)-1].Transcript())
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	good := Config{StatePath: dir + "/s.jsonl", Workspace: dir + "/ws", ModelURL: "http://127.0.0.1:9/v1"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no state", func(c *Config) { c.StatePath = "" }, "state path"},
		{"no workspace", func(c *Config) { c.Workspace = "" }, "workspace"},
		{"bad mode", func(c *Config) { c.PermissionMode = "yolo" }, "permission mode"},
		{"bad tool", func(c *Config) { c.Tools = []string{"shell", "rm_rf"} }, "unknown tool"},
		{"bad url", func(c *Config) { c.ModelURL = "ftp://x" }, "model URL"},
		{"no url", func(c *Config) { c.ModelURL = "" }, "model URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := good
			tc.edit(&cfg)
			err := Run(t.Context(), cfg, strings.NewReader(""), &lockedBuffer{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run: %v, want an error about %q", err, tc.want)
			}
		})
	}
	if _, err := os.Stat(good.StatePath); err == nil {
		t.Fatal("a rejected config created the state file")
	}
}

func TestUnknownAndMalformedCommandsAreLogged(t *testing.T) {
	model := fakemodel.New(t)
	h := startAgent(t, testConfig(t, model))
	if _, err := h.stdin.Write([]byte("{\"type\":\"dance\"}\nnot json\n\n{\"type\":\"answer\",\"interaction_id\":\"x\",\"decision\":\"maybe\"}\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"unknown command type \"dance\"", "not a JSON command", "decision \"maybe\""} {
		h.waitFor("log "+want, func(e event) bool { return e.typ() == "log" && strings.Contains(e.str("message"), want) })
	}
	// U+2028 inside a JSON string does not split the line.
	h.input("in_1", "line\u2028separator")
	h.waitEnd("in_1")
	if got := model.Requests()[0].Last().Content; got != "line\u2028separator" {
		t.Fatalf("content %q", got)
	}
}

// TestBrokenModelCallIsMadeAgain: a model call whose way to the model
// breaks (the stream cut mid-way, the connection reset before an answer)
// is made again and the reply completes; each resend is a model.retry
// event, and the model never sees what the broken call had streamed.
func TestBrokenModelCallIsMadeAgain(t *testing.T) {
	for _, tc := range []struct {
		name        string
		first       fakemodel.Reply
		afterOutput bool
	}{
		{"cut mid-stream", fakemodel.Text("a partial answer that breaks off").WithCutAfter(3), true},
		{"reset before any answer", fakemodel.Reset(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			model := fakemodel.New(t, tc.first, fakemodel.Text("the whole answer"))
			cfg := testConfig(t, model)
			cfg.BrokenPause = 10 * time.Millisecond
			h := startAgent(t, cfg)
			h.input("in_1", "hello")
			retry := h.waitType("model.retry")
			if retry["after_output"] != tc.afterOutput || retry["attempt"] != float64(1) || retry.str("error") == "" {
				t.Fatalf("model.retry %v", retry)
			}
			end := h.waitEnd("in_1")
			if end.str("outcome") != outcomeCompleted {
				t.Fatalf("turn.end %v; events:\n%s", end, h.dump())
			}
			reqs := model.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d model requests, want 2", len(reqs))
			}
			if last := reqs[1].Last(); last.Role != roleUser || last.Content != "hello" {
				t.Fatalf("the call made again ends with %s %q, want the user's input alone:\n%s", last.Role, last.Content, reqs[1].Transcript())
			}
			var text strings.Builder
			for _, e := range h.all() {
				if e.typ() == "text.delta" {
					text.WriteString(e.str("delta"))
				}
			}
			if !strings.HasSuffix(text.String(), "the whole answer") {
				t.Fatalf("text %q does not end with the whole answer", text.String())
			}
			if err := h.finish(); err != nil {
				t.Fatal(err)
			}
			// The conversation keeps the whole answer once, not the broken part.
			state := readFile(t, cfg.StatePath)
			if strings.Contains(state, "breaks off") || strings.Count(state, "the whole answer") != 1 {
				t.Fatalf("the conversation file:\n%s", state)
			}
		})
	}
}

// TestBrokenModelCallGivesUp: a way to the model that stays broken past
// the retries fails the reply, saying so in words.
func TestBrokenModelCallGivesUp(t *testing.T) {
	cut := fakemodel.Text("breaks off again and again").WithCutAfter(2)
	model := fakemodel.New(t, cut, cut, fakemodel.Text("never asked"))
	cfg := testConfig(t, model)
	cfg.BrokenRetries, cfg.BrokenPause = 1, 10*time.Millisecond
	h := startAgent(t, cfg)
	h.input("in_1", "hello")
	end := h.waitEnd("in_1")
	msg, _ := end.obj("error")["message"].(string)
	if end.str("outcome") != outcomeFailed || !strings.Contains(msg, "did not come back after 2 tries") {
		t.Fatalf("turn.end %v", end)
	}
	if n := len(model.Requests()); n != 2 {
		t.Fatalf("%d model requests, want 2", n)
	}
}
