package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// recorder is a streamHandler that writes down what it saw.
type recorder struct {
	texts, thoughts strings.Builder
	starts          []string // id:name
}

func (r *recorder) text(d string)      { r.texts.WriteString(d) }
func (r *recorder) reasoning(d string) { r.thoughts.WriteString(d) }
func (r *recorder) toolStart(id, name string) {
	r.starts = append(r.starts, id+":"+name)
}

func (r *recorder) resend(int, error, time.Duration) {}

// sseOf renders data lines as an event stream.
func sseOf(data ...string) string {
	var b strings.Builder
	for _, d := range data {
		fmt.Fprintf(&b, "data: %s\n\n", d)
	}
	return b.String()
}

func TestParseStream(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stream    string
		text      string
		reasoning string
		starts    string
		calls     string // name(args) ...
		finish    string
		usage     usage
		err       string
	}{
		{
			name: "text and usage",
			stream: sseOf(`{"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"Hel"}}]}`,
				`{"choices":[{"index":0,"delta":{"content":"lo"},"finish_reason":null}]}`,
				`{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
				`{"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":3}}`,
				`[DONE]`),
			text: "Hello", finish: "stop", usage: usage{12, 3},
		},
		{
			name: "reasoning in both spellings",
			stream: sseOf(`{"choices":[{"delta":{"reasoning_content":"a"}}]}`,
				`{"choices":[{"delta":{"reasoning":"b"}}]}`,
				`{"choices":[{"delta":{"content":"c"},"finish_reason":"stop"}]}`, `[DONE]`),
			text: "c", reasoning: "ab", finish: "stop",
		},
		{
			name: "tool calls merged by index",
			stream: sseOf(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"shell","arguments":""}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"command\":"}}]}}]}`,
				`{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"ls\"}"}},{"index":1,"function":{"arguments":"th\":\"x\"}"}}]}}]}`,
				`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`, `[DONE]`),
			starts: "call_a:shell call_b:read_file", calls: `shell({"command":"ls"}) read_file({"path":"x"})`, finish: "tool_calls",
		},
		{
			name: "a call without id or index",
			stream: sseOf(`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"list_dir","arguments":"{}"}}]}}]}`,
				`{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}`, `[DONE]`),
			calls: `list_dir({})`, finish: "tool_calls",
		},
		{
			name:   "no [DONE] after a finish",
			stream: sseOf(`{"choices":[{"delta":{"content":"x"},"finish_reason":"length"}]}`),
			text:   "x", finish: "length",
		},
		{
			name:   "comments, other choices and CRLF",
			stream: ": keepalive\r\n\r\ndata: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"no\"}},{\"index\":0,\"delta\":{\"content\":\"yes\"},\"finish_reason\":\"stop\"}]}\r\n\r\ndata: [DONE]\r\n\r\n",
			text:   "yes", finish: "stop",
		},
		{name: "cut off", stream: sseOf(`{"choices":[{"delta":{"content":"par"}}]}`), text: "par", err: "ended before"},
		{name: "empty", stream: "", err: "ended before"},
		{name: "bad json", stream: sseOf(`{"choices":[`), err: "malformed chunk"},
		{name: "error object", stream: sseOf(`{"error":{"message":"rate limited","type":"x"}}`), err: "rate limited"},
		{name: "bad index", stream: sseOf(`{"choices":[{"delta":{"tool_calls":[{"index":-1}]}}]}`), err: "index -1"},
		{name: "huge index", stream: sseOf(`{"choices":[{"delta":{"tool_calls":[{"index":100000}]}}]}`), err: "index 100000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			res, err := parseStream(strings.NewReader(tc.stream), rec)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want %q", err, tc.err)
				}
			} else if err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, c := range res.Calls {
				calls = append(calls, c.Function.Name+"("+c.Function.Arguments+")")
				if c.ID == "" || c.Type != "function" {
					t.Errorf("call %+v", c)
				}
			}
			if res.Content != tc.text || rec.texts.String() != tc.text || rec.thoughts.String() != tc.reasoning ||
				strings.Join(rec.starts, " ") != tc.starts || strings.Join(calls, " ") != tc.calls ||
				res.FinishReason != tc.finish || res.Usage != tc.usage {
				t.Fatalf("got %+v text %q reasoning %q starts %v", res, rec.texts.String(), rec.thoughts.String(), rec.starts)
			}
		})
	}
}

func TestErrorStreamIsAModelError(t *testing.T) {
	_, err := parseStream(strings.NewReader(sseOf(`{"error":"quota"}`)), &recorder{})
	var me *modelError
	if !errors.As(err, &me) || me.Code != codeModelError || !strings.Contains(me.Message, "quota") {
		t.Fatalf("%v", err)
	}
}

func TestMessageJSON(t *testing.T) {
	m := message{Role: roleAssistant, ToolCalls: []toolCall{{ID: "c", Type: "function", Function: functionCall{Name: "shell", Arguments: "{}"}}}}
	b, _ := json.Marshal(m)
	if !strings.Contains(string(b), `"content":null`) {
		t.Fatalf("%s", b)
	}
	var back message
	if err := json.Unmarshal(b, &back); err != nil || back.Content != "" || len(back.ToolCalls) != 1 {
		t.Fatalf("%+v %v", back, err)
	}
	b, _ = json.Marshal(message{Role: roleUser, Content: ""})
	if string(b) != `{"role":"user","content":""}` {
		t.Fatalf("%s", b)
	}
}

// FuzzParseStream feeds arbitrary bytes to the chunk parser: it must not
// panic, and what it reports must agree with what it returns.
func FuzzParseStream(f *testing.F) {
	f.Add(sseOf(`{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}`, `[DONE]`))
	f.Add(sseOf(`{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"shell","arguments":"{}"}}]}}]}`, `[DONE]`))
	f.Add(sseOf(`{"choices":[{"delta":{"tool_calls":[{"function":{"name":"x"}},{"index":3,"id":"z"}]}}]}`))
	f.Add("data: {\"choices\":[{\"delta\":{\"reasoning\":\"r\"}}]}\ndata: more\n\n")
	f.Add(sseOf(`{"usage":{"prompt_tokens":-1}}`, `{"error":null}`))
	f.Fuzz(func(t *testing.T, stream string) {
		rec := &recorder{}
		res, err := parseStream(strings.NewReader(stream), rec)
		if res.Content != rec.texts.String() {
			t.Fatalf("content %q, streamed %q", res.Content, rec.texts.String())
		}
		if len(res.Calls) > maxToolCalls || len(rec.starts) > len(res.Calls) {
			t.Fatalf("%d calls, %d starts", len(res.Calls), len(rec.starts))
		}
		for _, c := range res.Calls {
			if c.ID == "" {
				t.Fatalf("call without id: %+v", c)
			}
		}
		if err == nil && res.FinishReason == "" && !strings.Contains(stream, "[DONE]") {
			t.Fatalf("a stream without finish or [DONE] was accepted")
		}
	})
}

// FuzzToolArgs feeds arbitrary arguments to every tool's argument parsing
// and path resolution: they must not panic, and a path that resolves is
// absolute and clean, inside the workspace when it is relative and does
// not climb.
func FuzzToolArgs(f *testing.F) {
	f.Add(`{"path":"a/b.txt","offset":"3","limit":10}`)
	f.Add(`{"command":"ls","timeout_seconds":"1e3"}`)
	f.Add(`{"path":"../../etc/passwd","replace_all":"TRUE"}`)
	f.Add(`{"path":"/abs//x/./y/"}`)
	f.Add(`{"path":"\u0000"}`)
	f.Add(`null`)
	tb := &toolbox{workspace: "/ws"}
	f.Fuzz(func(t *testing.T, raw string) {
		var (
			sh shellArgs
			rd readArgs
			wr writeArgs
			ed editArgs
			ls listArgs
			se searchArgs
		)
		for _, v := range []any{&sh, &rd, &wr, &ed, &ls, &se} {
			_ = decodeArgs(raw, v)
		}
		if d := sh.timeout(DefaultShellTimeout); d <= 0 || d > maxShellTimeout {
			t.Fatalf("timeout %v from %q", d, raw)
		}
		for _, p := range []string{rd.Path, wr.Path, ed.Path, ls.Path, se.Path} {
			got, err := tb.resolveOr(p, ".")
			if err != nil {
				continue
			}
			if !strings.HasPrefix(got, "/") || got != filepath.Clean(got) {
				t.Fatalf("resolve(%q) = %q", p, got)
			}
			if p != "" && !strings.HasPrefix(p, "/") && !strings.Contains(p, "..") && got != "/ws" && !strings.HasPrefix(got, "/ws/") {
				t.Fatalf("relative %q resolved outside the workspace: %q", p, got)
			}
		}
	})
}
