package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Roles of Chat Completions messages.
const (
	roleSystem    = "system"
	roleUser      = "user"
	roleAssistant = "assistant"
	roleTool      = "tool"
)

// Error codes of a failed reply.
const (
	codeModelError       = "MODEL_ERROR"
	codeModelUnreachable = "MODEL_UNREACHABLE"
	codeMaxSteps         = "MAX_STEPS"
	codeStateError       = "STATE_ERROR"
)

// message is one Chat Completions message, as sent to the model and as
// recorded in the conversation file.
type message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []toolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// MarshalJSON writes an assistant message that only calls tools with
// "content": null, the form every OpenAI-compatible server accepts.
func (m message) MarshalJSON() ([]byte, error) {
	type plain message
	if m.Role == roleAssistant && m.Content == "" && len(m.ToolCalls) > 0 {
		return json.Marshal(struct {
			plain
			Content *string `json:"content"`
		}{plain: plain(m)})
	}
	return json.Marshal(plain(m))
}

// toolCall is an assistant's request to run one tool.
type toolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function functionCall `json:"function"`
}

type functionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// toolSpec is one function tool offered to the model.
type toolSpec struct {
	Type     string       `json:"type"`
	Function functionSpec `json:"function"`
}

type functionSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

type chatRequest struct {
	Model         string        `json:"model"`
	Messages      []message     `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions streamOptions `json:"stream_options"`
	Tools         []toolSpec    `json:"tools,omitempty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// modelError is a model call that failed: Code is codeModelError or
// codeModelUnreachable. Its text never holds the credential. Broken marks
// a failure of the way to the model, not of the model: the model path
// could not be reached, or its stream broke off (in a sandbox: the
// AstraBox server holding the Session stopped); such a call may be made
// again once the path is back.
type modelError struct {
	Code    string
	Message string
	Broken  bool
}

func (e *modelError) Error() string { return e.Message }

// maxErrorBody bounds how much of an error response is quoted.
const maxErrorBody = 2 << 10

// modelClient posts streaming Chat Completions requests.
type modelClient struct {
	url   string // base URL; requests go to url + "/chat/completions"
	key   string
	model string
	http  *http.Client
	// attempts bounds connection tries (0: connectAttempts).
	attempts int
}

// stream sends messages and tools to the model and feeds the streamed
// reply to h as it arrives. It returns what was received even when it
// fails, so a reply cut off by an interrupt keeps its partial text. A
// failure is a *modelError unless ctx ended, in which case it wraps
// ctx's error.
func (c *modelClient) stream(ctx context.Context, messages []message, tools []toolSpec, h streamHandler) (streamResult, error) {
	body, err := json.Marshal(chatRequest{
		Model:         c.model,
		Messages:      messages,
		Stream:        true,
		StreamOptions: streamOptions{IncludeUsage: true},
		Tools:         tools,
	})
	if err != nil {
		return streamResult{}, fmt.Errorf("encode model request: %w", err)
	}
	resp, err := c.post(ctx, body, h)
	if err != nil {
		if ctx.Err() != nil {
			return streamResult{}, fmt.Errorf("model request: %w", ctx.Err())
		}
		return streamResult{}, &modelError{Code: codeModelUnreachable, Message: c.redact("model unreachable: " + err.Error()), Broken: true}
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		msg := fmt.Sprintf("model answered HTTP %d", resp.StatusCode)
		if detail := errorDetail(b); detail != "" {
			msg += ": " + detail
		}
		if hint := statusHint(resp.StatusCode); hint != "" {
			msg += " (" + hint + ")"
		}
		return streamResult{}, &modelError{Code: codeModelError, Message: c.redact(msg)}
	}
	res, err := parseStream(resp.Body, h)
	if err != nil {
		if ctx.Err() != nil {
			return res, fmt.Errorf("model stream: %w", ctx.Err())
		}
		var me *modelError
		if errors.As(err, &me) {
			me.Message = c.redact(me.Message)
			return res, me
		}
		return res, &modelError{Code: codeModelError, Message: c.redact("model stream: " + err.Error()),
			Broken: errors.Is(err, errStreamEnded) || errors.Is(err, errStreamRead)}
	}
	return res, nil
}

// connectAttempts bounds how often post tries to reach the model before
// any answer: in a sandbox the model path is a tunnel to the AstraBox
// server, which is briefly away while the server restarts.
const connectAttempts = 12

// post sends the request, trying again (with a growing pause, about 20 s
// in all) when no connection could be made; once any answer arrives it
// is returned as it is, so nothing is ever sent to the model twice after
// it was received.
func (c *modelClient) post(ctx context.Context, body []byte, h streamHandler) (*http.Response, error) {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(c.url, "/")+"/chat/completions", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		if c.key != "" {
			req.Header.Set("Authorization", "Bearer "+c.key)
		}
		resp, err := c.http.Do(req)
		limit := c.connectLimit()
		if err == nil || ctx.Err() != nil || attempt >= limit || !isConnectError(err) {
			return resp, err
		}
		if !neverConnected(err) {
			h.resend(attempt, err, pause)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 3*time.Second)
	}
}

// statusHint says what to do about a model's error answer, in words.
func statusHint(code int) string {
	switch {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return "the model endpoint refused the key: check the runtime profile's model.api_key"
	case code == http.StatusNotFound:
		return "check the runtime profile's model.base_url and the Agent's model name"
	case code == http.StatusTooManyRequests:
		return "the model endpoint's rate limit: it was asked again as often as the profile's model.retries allow; send the input again later"
	case code >= 500:
		return "the model endpoint failed: it was asked again as often as the profile's model.retries allow; send the input again later"
	}
	return ""
}

// connectLimit is how many tries post makes.
func (c *modelClient) connectLimit() int {
	if c.attempts <= 0 {
		return connectAttempts
	}
	return c.attempts
}

// isConnectError reports a failure before any answer: the connection
// could not be made, or was reset or closed before the response began (in
// a sandbox: the model path's tunnel passing from one AstraBox replica to
// another). Such a request may be sent again; at worst the model saw it
// twice and answered nobody.
func isConnectError(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && (op.Op == "dial" || errors.Is(err, syscall.ECONNRESET)) {
		return true
	}
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// neverConnected reports a failure to connect at all: the request never
// left.
func neverConnected(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// redact removes the credential from s, in case a server echoes it.
func (c *modelClient) redact(s string) string {
	if c.key == "" {
		return s
	}
	return strings.ReplaceAll(s, c.key, "[redacted]")
}

// errorDetail extracts the message of an OpenAI-style error body
// ({"error":{"message":...}}), or else returns the body as text.
func errorDetail(b []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(b, &e) == nil && len(e.Error) > 0 {
		if msg := errorValue(e.Error); msg != "" {
			return msg
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), "\uFFFD"))
}

// errorValue returns the text of an "error" value: its "message" when it
// is an object, the string itself, or else its JSON.
func errorValue(v json.RawMessage) string {
	var obj struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(v, &obj) == nil && obj.Message != "" {
		return obj.Message
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}
