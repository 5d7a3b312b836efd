package fakemodel

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/sse"
)

// completion is a stream merged back into one reply.
type completion struct {
	status           int
	body             string // an error response's body
	text, reasoning  string
	calls            []ToolCall
	finish           string
	usage            *Usage
	chunks           int
	done             bool
	fragmentsPerCall map[int]int
}

var offered = []map[string]any{
	{"type": "function", "function": map[string]any{"name": "shell", "parameters": map[string]any{"type": "object"}}},
	{"type": "function", "function": map[string]any{"name": "read_file"}},
}

func chatBody(extra map[string]any) map[string]any {
	b := map[string]any{
		"model":          "m1",
		"stream":         true,
		"stream_options": map[string]any{"include_usage": true},
		"tools":          offered,
		"messages":       []any{map[string]any{"role": "user", "content": "hi"}},
	}
	for k, v := range extra {
		b[k] = v
	}
	return b
}

func post(t *testing.T, url string, body any, header http.Header) *http.Response {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// complete posts body and merges the streamed answer.
func complete(t *testing.T, url string, body any, header http.Header) completion {
	t.Helper()
	resp := post(t, url, body, header)
	c := completion{status: resp.StatusCode, fragmentsPerCall: map[int]int{}}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		c.body = string(b)
		return c
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	r := sse.NewReader(resp.Body, 0)
	for {
		f, err := r.Next()
		if errors.Is(err, io.EOF) {
			return c
		}
		if err != nil {
			t.Fatal(err)
		}
		if c.done {
			t.Fatalf("data after [DONE]: %q", f.Data)
		}
		if f.Data == "[DONE]" {
			c.done = true
			continue
		}
		c.chunks++
		var ch struct {
			Object  string `json:"object"`
			Model   string `json:"model"`
			Choices []struct {
				Delta struct {
					Content          string `json:"content"`
					ReasoningContent string `json:"reasoning_content"`
					ToolCalls        []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Type     string `json:"type"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(f.Data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", f.Data, err)
		}
		if ch.Object != "chat.completion.chunk" || ch.Model != "m1" {
			t.Fatalf("chunk %q", f.Data)
		}
		if ch.Usage != nil {
			if len(ch.Choices) != 0 {
				t.Fatalf("usage chunk with choices: %q", f.Data)
			}
			c.usage = ch.Usage
		}
		for _, choice := range ch.Choices {
			c.text += choice.Delta.Content
			c.reasoning += choice.Delta.ReasoningContent
			for _, tc := range choice.Delta.ToolCalls {
				for len(c.calls) <= tc.Index {
					c.calls = append(c.calls, ToolCall{})
				}
				call := &c.calls[tc.Index]
				if tc.ID != "" {
					if tc.Type != "function" {
						t.Fatalf("call fragment %q", f.Data)
					}
					call.ID = tc.ID
				}
				call.Name += tc.Function.Name
				call.Arguments += tc.Function.Arguments
				c.fragmentsPerCall[tc.Index]++
			}
			if choice.FinishReason != nil {
				c.finish = *choice.FinishReason
			}
		}
	}
}

func TestScriptedReplies(t *testing.T) {
	s := New(t,
		Text("Hello there, this is a longer text.").WithReasoning("thinking..."),
		Text("I will look.").AndCall("shell", map[string]string{"command": "ls -la"}).AndCall("read_file", `{"path":"a.txt"}`),
		Func(func(r Request) Reply { return Text("you said " + r.Last().Content) }),
	)
	u := s.URL() + "/chat/completions"

	c := complete(t, u, chatBody(nil), nil)
	if c.text != "Hello there, this is a longer text." || c.reasoning != "thinking..." || c.finish != "stop" || !c.done || c.chunks < 5 {
		t.Fatalf("text reply %+v", c)
	}
	if c.usage == nil || c.usage.PromptTokens <= 0 || c.usage.TotalTokens != c.usage.PromptTokens+c.usage.CompletionTokens {
		t.Fatalf("usage %+v", c.usage)
	}

	c = complete(t, u, chatBody(nil), nil)
	if c.text != "I will look." || c.finish != "tool_calls" || len(c.calls) != 2 {
		t.Fatalf("tool reply %+v", c)
	}
	if c.calls[0].Name != "shell" || c.calls[0].Arguments != `{"command":"ls -la"}` || c.calls[1].Arguments != `{"path":"a.txt"}` ||
		c.calls[0].ID == "" || c.calls[0].ID == c.calls[1].ID {
		t.Fatalf("calls %+v", c.calls)
	}
	if c.fragmentsPerCall[0] < 3 {
		t.Fatalf("arguments not fragmented: %v", c.fragmentsPerCall)
	}

	// Without include_usage there is no usage chunk; the path without /v1
	// is served too.
	c = complete(t, strings.TrimSuffix(s.URL(), "/v1")+"/chat/completions", chatBody(map[string]any{"stream_options": nil}), nil)
	if c.text != "you said hi" || c.usage != nil {
		t.Fatalf("computed reply %+v", c)
	}
	if c = complete(t, u, chatBody(nil), nil); c.text != Exhausted {
		t.Fatalf("after the script %+v", c)
	}

	reqs := s.Requests()
	if len(reqs) != 4 || reqs[0].Body.Model != "m1" || reqs[0].Last().Content != "hi" || reqs[2].Path != "/chat/completions" ||
		strings.Join(reqs[0].ToolNames(), ",") != "shell,read_file" || reqs[0].Header.Get("Content-Type") != "application/json" {
		t.Fatalf("requests %+v", reqs)
	}
}

func TestRefusals(t *testing.T) {
	s := New(t, Call("write_file", `{}`), Status(503, `{"error":{"message":"busy"}}`))
	u := s.URL() + "/chat/completions"
	if c := complete(t, u, chatBody(nil), nil); c.status != 400 || !strings.Contains(c.body, `write_file`) {
		t.Fatalf("a tool the request does not offer: %+v", c)
	}
	if c := complete(t, u, chatBody(nil), nil); c.status != 503 || !strings.Contains(c.body, "busy") {
		t.Fatalf("status reply %+v", c)
	}
	if c := complete(t, u, chatBody(map[string]any{"stream": false}), nil); c.status != 400 {
		t.Fatalf("non-streaming %+v", c)
	}
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET: %d", resp.StatusCode)
	}

	s.WithKey("k1").Push(Text("authorized"))
	if c := complete(t, u, chatBody(nil), http.Header{"Authorization": {"Bearer wrong"}}); c.status != 401 {
		t.Fatalf("wrong key %+v", c)
	}
	if c := complete(t, u, chatBody(nil), http.Header{"Authorization": {"Bearer k1"}}); c.text != "authorized" {
		t.Fatalf("right key %+v", c)
	}
	if n := len(s.Requests()); n != 5 {
		t.Fatalf("%d requests recorded, want every one but the GET", n)
	}
}

func TestHoldUntilReleased(t *testing.T) {
	gate := make(chan struct{})
	s := New(t, Text("first piece, then the rest").HoldUntil(gate).WithDelay(time.Millisecond))
	resp := post(t, s.URL()+"/chat/completions", chatBody(nil), nil)
	r := sse.NewReader(resp.Body, 0)
	var seen []string
	for len(seen) < 2 {
		f, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, f.Data)
	}
	if !strings.Contains(seen[1], `"content":"first pi"`) {
		t.Fatalf("first chunks %q", seen)
	}
	// Nothing more arrives until the gate opens.
	next := make(chan string, 1)
	go func() {
		f, _ := r.Next()
		next <- f.Data
	}()
	select {
	case d := <-next:
		t.Fatalf("a held stream went on: %q", d)
	default:
	}
	close(gate)
	if d := <-next; !strings.Contains(d, `"content"`) {
		t.Fatalf("after release %q", d)
	}
}

func TestHeldReplyEndsWithTheClient(t *testing.T) {
	s := New(t, Text("held forever").HoldUntil(make(chan struct{})), Text("next"))
	resp := post(t, s.URL()+"/chat/completions", chatBody(nil), nil)
	r := sse.NewReader(resp.Body, 0)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The server is free for the next request.
	if c := complete(t, s.URL()+"/chat/completions", chatBody(nil), nil); c.text != "next" {
		t.Fatalf("%+v", c)
	}
}

func TestMessageContentForms(t *testing.T) {
	var m Message
	for raw, want := range map[string]string{
		`{"role":"user","content":"plain"}`: "plain",
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}`: "",
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]}`:                   "ab",
	} {
		m = Message{}
		if err := json.Unmarshal([]byte(raw), &m); err != nil || m.Content != want {
			t.Errorf("%s: %+v %v", raw, m, err)
		}
	}
	b, _ := json.Marshal(Message{Role: "user", Content: "x"})
	if string(b) != `{"role":"user","content":"x"}` {
		t.Errorf("marshal %s", b)
	}
	r := Request{Body: ChatRequest{Messages: []Message{{Role: "user", Content: "q"}, {Role: "assistant", ToolCalls: []MessageToolCall{{}}}}}}
	r.Body.Messages[1].ToolCalls[0].Function.Name = "shell"
	if got := r.Transcript(); got != "user: q\nassistant -> shell()\n" {
		t.Errorf("transcript %q", got)
	}
}
