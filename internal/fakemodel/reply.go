package fakemodel

import (
	"encoding/json"
	"fmt"
	"time"
)

// Reply is one scripted answer of the server. Build one with Text, Call,
// Func, Status or Raw and adjust it with the With… methods; the zero Reply
// is an empty text reply.
type Reply struct {
	// Text is sent as several delta.content chunks.
	Text string
	// Reasoning is sent, before the text, as delta.reasoning_content
	// chunks.
	Reasoning string
	// Calls are sent after the text as delta.tool_calls fragments, the
	// arguments split in pieces; a reply with calls finishes with
	// "tool_calls".
	Calls []ToolCall
	// FinishReason overrides the finish reason ("stop" or "tool_calls").
	FinishReason string
	// Delay is slept between chunks.
	Delay time.Duration
	// Hold, when not nil, stops the stream after its first content chunk
	// (reasoning, text or a call's first fragment) until the channel is
	// closed, the client goes away or the test ends.
	Hold <-chan struct{}
	// Usage, when not nil, is the usage chunk's counts; otherwise they are
	// derived from the request's and the reply's sizes.
	Usage *Usage
	// CutAfter, when positive, drops the connection (a reset) after that
	// many chunks of the stream, the role chunk first: a stream that
	// breaks off mid-way.
	CutAfter int

	// status and body answer with an HTTP error instead of a stream.
	status int
	body   string
	// raw, when set, is written verbatim as the response body.
	raw *string
	// reset drops the connection before any answer.
	reset bool
	// compute makes the reply from the request.
	compute func(Request) Reply
}

// ToolCall is one scripted tool call. An empty ID is filled in with a
// unique call_N.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string // JSON text
}

// Usage is the token counts of a usage chunk.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Text is a reply that streams s and finishes with "stop".
func Text(s string) Reply { return Reply{Text: s} }

// Call is a reply that calls the tool name with args: a string is taken as
// the arguments' JSON text, anything else is encoded to JSON.
func Call(name string, args any) Reply { return Reply{}.AndCall(name, args) }

// AndCall returns r with one more tool call (see Call).
func (r Reply) AndCall(name string, args any) Reply {
	r.Calls = append(append([]ToolCall(nil), r.Calls...), ToolCall{Name: name, Arguments: argsJSON(args)})
	return r
}

// Func is a reply computed from the request when it arrives, e.g. to
// echo what the model was sent. The reply f returns is played as is (a
// Func it returns is not called again).
func Func(f func(Request) Reply) Reply { return Reply{compute: f} }

// Status is a reply that answers HTTP code with body (sent as JSON when it
// is JSON, else as text).
func Status(code int, body string) Reply { return Reply{status: code, body: body} }

// Reset is no answer at all: the connection is dropped (a reset) as soon
// as the request has been read.
func Reset() Reply { return Reply{reset: true} }

// WithCutAfter drops the connection after n chunks of the stream (see
// Reply.CutAfter).
func (r Reply) WithCutAfter(n int) Reply { r.CutAfter = n; return r }

// Raw is a reply whose response body is body verbatim, with status 200 and
// an event-stream content type: for malformed streams.
func Raw(body string) Reply { return Reply{raw: &body} }

// WithReasoning returns r with reasoning streamed before its text.
func (r Reply) WithReasoning(s string) Reply { r.Reasoning = s; return r }

// WithDelay returns r with d slept between chunks.
func (r Reply) WithDelay(d time.Duration) Reply { r.Delay = d; return r }

// HoldUntil returns r held after its first content chunk until gate is
// closed.
func (r Reply) HoldUntil(gate <-chan struct{}) Reply { r.Hold = gate; return r }

// WithUsage returns r with fixed usage counts.
func (r Reply) WithUsage(prompt, completion int) Reply {
	r.Usage = &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	return r
}

// WithFinishReason returns r finishing with reason.
func (r Reply) WithFinishReason(reason string) Reply { r.FinishReason = reason; return r }

func argsJSON(args any) string {
	if s, ok := args.(string); ok {
		return s
	}
	b, err := json.Marshal(args)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode tool arguments: %v", err))
	}
	return string(b)
}

// pieces splits s into pieces of at most n runes (one piece for "").
func pieces(s string, n int) []string {
	if s == "" {
		return nil
	}
	var out []string
	r := []rune(s)
	for len(r) > 0 {
		k := min(n, len(r))
		out = append(out, string(r[:k]))
		r = r[k:]
	}
	return out
}
