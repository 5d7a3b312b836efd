package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/astrabox/astrabox/internal/sse"
)

// maxStreamFrame bounds one SSE frame of the model's stream.
const maxStreamFrame = 8 << 20

// maxToolCalls bounds the tool calls of one model reply; fragments beyond
// it are a malformed stream.
const maxToolCalls = 128

// streamHandler sees a model reply as it streams. The calls come from the
// goroutine that reads the stream, in stream order.
type streamHandler interface {
	// text and reasoning receive content and reasoning fragments.
	text(delta string)
	reasoning(delta string)
	// toolStart is called once per tool call, when its id and name are
	// known.
	toolStart(id, name string)
	// resend is told that the request is sent again after pause because
	// try failed with err before any answer, where the model may have
	// received it (a connection reset or closed, not one never made).
	resend(try int, err error, pause time.Duration)
}

// streamResult is one model reply, complete or as far as it got.
type streamResult struct {
	Content string
	// Calls are the tool calls in index order. Only a complete stream has
	// finished arguments; a call whose id the model never sent has one
	// made from its index (and had no toolStart).
	Calls        []toolCall
	FinishReason string
	Usage        usage
}

// chunk is one chat.completion.chunk. Unknown fields are ignored.
type chunk struct {
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			ToolCalls        []toolCallDelta `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int64 `json:"prompt_tokens"`
		CompletionTokens int64 `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// toolCallDelta is one fragment of a streamed tool call; fragments with the
// same index belong to one call.
type toolCallDelta struct {
	Index    *int   `json:"index"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// accumulator merges the chunks of one reply.
type accumulator struct {
	h       streamHandler
	content strings.Builder
	calls   []*partialCall
	finish  string
	usage   usage
	done    bool
}

type partialCall struct {
	id, name string
	args     strings.Builder
	started  bool
}

// errStreamEnded reports a stream that ended before its reply finished.
var errStreamEnded = errors.New("the stream ended before the reply finished")

// errStreamRead reports a stream whose connection failed mid-way.
var errStreamRead = errors.New("read")

// parseStream reads an OpenAI Chat Completions event stream from r to its
// "[DONE]" and returns the merged reply. A stream that ends after a
// finish_reason but without "[DONE]" is accepted; one that ends earlier,
// or holds a frame that does not parse, or reports an error object, is an
// error (the result still holds what arrived before it).
func parseStream(r io.Reader, h streamHandler) (streamResult, error) {
	a := &accumulator{h: h}
	sr := sse.NewReader(r, maxStreamFrame)
	for !a.done {
		f, err := sr.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				if a.finish != "" {
					break
				}
				return a.result(), errStreamEnded
			}
			return a.result(), fmt.Errorf("%w: %w", errStreamRead, err)
		}
		if err := a.feed(f.Data); err != nil {
			return a.result(), err
		}
	}
	return a.result(), nil
}

// feed merges the data of one frame: a chunk or "[DONE]".
func (a *accumulator) feed(data string) error {
	data = strings.TrimSpace(data)
	if data == "[DONE]" {
		a.done = true
		return nil
	}
	if data == "" {
		return nil
	}
	var c chunk
	if err := json.Unmarshal([]byte(data), &c); err != nil {
		return fmt.Errorf("malformed chunk: %w", err)
	}
	if len(c.Error) > 0 && string(c.Error) != "null" {
		return &modelError{Code: codeModelError, Message: "model stream error: " + errorValue(c.Error)}
	}
	if c.Usage != nil {
		a.usage = usage{InputTokens: c.Usage.PromptTokens, OutputTokens: c.Usage.CompletionTokens}
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			continue // only one choice is requested
		}
		d := ch.Delta
		if d.ReasoningContent != nil && *d.ReasoningContent != "" {
			a.h.reasoning(*d.ReasoningContent)
		} else if d.Reasoning != nil && *d.Reasoning != "" {
			a.h.reasoning(*d.Reasoning)
		}
		if d.Content != nil && *d.Content != "" {
			a.content.WriteString(*d.Content)
			a.h.text(*d.Content)
		}
		for _, tc := range d.ToolCalls {
			if err := a.mergeCall(tc); err != nil {
				return err
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			a.finish = *ch.FinishReason
		}
	}
	return nil
}

// mergeCall adds one tool call fragment. A fragment without an index
// continues the last call, or starts the first.
func (a *accumulator) mergeCall(tc toolCallDelta) error {
	i := len(a.calls) - 1
	if tc.Index != nil {
		i = *tc.Index
	}
	if i < 0 && tc.Index == nil {
		i = 0
	}
	if i < 0 || i >= maxToolCalls {
		return fmt.Errorf("malformed chunk: tool call index %d", i)
	}
	for len(a.calls) <= i {
		a.calls = append(a.calls, &partialCall{})
	}
	p := a.calls[i]
	if p.id == "" {
		p.id = tc.ID
	}
	if p.name == "" {
		p.name = tc.Function.Name
	} else if !p.started {
		p.name += tc.Function.Name
	}
	p.args.WriteString(tc.Function.Arguments)
	if !p.started && p.id != "" && p.name != "" {
		p.started = true
		a.h.toolStart(p.id, p.name)
	}
	return nil
}

// result returns the reply as merged so far. Calls that never got an id
// get one from their index.
func (a *accumulator) result() streamResult {
	r := streamResult{Content: a.content.String(), FinishReason: a.finish, Usage: a.usage}
	for i, p := range a.calls {
		id := p.id
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		r.Calls = append(r.Calls, toolCall{ID: id, Type: "function", Function: functionCall{Name: p.name, Arguments: p.args.String()}})
	}
	return r
}
