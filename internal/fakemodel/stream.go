package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"
)

// Chunk sizes: text and reasoning go in pieces of textPiece runes, a
// call's arguments in argPieces pieces.
const (
	textPiece = 8
	argPieces = 3
)

var completionSeq atomic.Int64

// chunkWriter writes the chunks of one completion.
type chunkWriter struct {
	w       http.ResponseWriter
	flusher http.Flusher
	id      string
	model   string
	created int64
}

func (c *chunkWriter) data(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakemodel: encode chunk: %v", err))
	}
	fmt.Fprintf(c.w, "data: %s\n\n", b)
	if c.flusher != nil {
		c.flusher.Flush()
	}
}

// choice writes a chunk with one choice holding delta.
func (c *chunkWriter) choice(delta map[string]any, finish any) {
	c.data(map[string]any{
		"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model,
		"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
	})
}

// stream plays reply as a completion stream.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	flusher, _ := w.(http.Flusher)
	c := &chunkWriter{
		w: w, flusher: flusher,
		id:      fmt.Sprintf("chatcmpl-%d", completionSeq.Add(1)),
		model:   req.Body.Model,
		created: time.Now().Unix(),
	}

	// Each step writes one chunk; the stream pauses between steps.
	var steps []func()
	steps = append(steps, func() { c.choice(map[string]any{"role": "assistant", "content": ""}, nil) })
	for _, p := range pieces(reply.Reasoning, textPiece) {
		steps = append(steps, func() { c.choice(map[string]any{"reasoning_content": p}, nil) })
	}
	for _, p := range pieces(reply.Text, textPiece) {
		steps = append(steps, func() { c.choice(map[string]any{"content": p}, nil) })
	}
	for i, call := range reply.Calls {
		steps = append(steps, func() {
			c.choice(map[string]any{"tool_calls": []any{map[string]any{
				"index": i, "id": call.ID, "type": "function",
				"function": map[string]any{"name": call.Name, "arguments": ""},
			}}}, nil)
		})
		n := max(1, (len([]rune(call.Arguments))+argPieces-1)/argPieces)
		for _, p := range pieces(call.Arguments, n) {
			steps = append(steps, func() {
				c.choice(map[string]any{"tool_calls": []any{map[string]any{
					"index": i, "function": map[string]any{"arguments": p},
				}}}, nil)
			})
		}
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(reply.Calls) > 0 {
			finish = "tool_calls"
		}
	}
	steps = append(steps, func() { c.choice(map[string]any{}, finish) })
	if req.Body.StreamOptions != nil && req.Body.StreamOptions.IncludeUsage {
		u := usageOf(req, reply)
		steps = append(steps, func() {
			c.data(map[string]any{"id": c.id, "object": "chat.completion.chunk", "created": c.created, "model": c.model, "choices": []any{}, "usage": u})
		})
	}

	// Hold after the first content chunk (the role chunk is step 0), or
	// after the role chunk when the reply has no content.
	holdAfter := 0
	if reply.Reasoning != "" || reply.Text != "" || len(reply.Calls) > 0 {
		holdAfter = 1
	}
	for i, step := range steps {
		if i > 0 && reply.Delay > 0 && !s.wait(r, reply.Delay, nil) {
			return
		}
		step()
		if reply.CutAfter > 0 && i+1 >= reply.CutAfter {
			drop(w)
			return
		}
		if i == holdAfter && reply.Hold != nil && !s.wait(r, 0, reply.Hold) {
			return
		}
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// usageOf returns the reply's scripted usage or counts derived from sizes
// (about four bytes a token).
func usageOf(req Request, reply Reply) Usage {
	if reply.Usage != nil {
		return *reply.Usage
	}
	out := len(reply.Text) + len(reply.Reasoning)
	for _, c := range reply.Calls {
		out += len(c.Name) + len(c.Arguments)
	}
	u := Usage{PromptTokens: len(req.Raw)/4 + 1, CompletionTokens: out/4 + 1}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}
