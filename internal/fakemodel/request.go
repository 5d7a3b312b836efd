package fakemodel

import (
	"encoding/json"
	"net/http"
	"strings"
)

// Request is one request the server received.
type Request struct {
	Method string
	Path   string
	Header http.Header
	// Body is the parsed request; Raw the bytes it was parsed from.
	Body ChatRequest
	Raw  []byte
}

// ChatRequest is the part of a Chat Completions request the server reads.
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []Message      `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options"`
	Tools         []Tool         `json:"tools"`
}

// StreamOptions are a request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Message is one message of a request.
type Message struct {
	Role string `json:"role"`
	// Content is the message's text: a string content as is, the text
	// parts of an array content joined, null as "".
	Content    string            `json:"-"`
	ToolCalls  []MessageToolCall `json:"tool_calls,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

// UnmarshalJSON reads a message whose content is a string, null or an
// array of parts.
func (m *Message) UnmarshalJSON(b []byte) error {
	type plain Message
	var v struct {
		plain
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*m = Message(v.plain)
	var s string
	if json.Unmarshal(v.Content, &s) == nil {
		m.Content = s
		return nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(v.Content, &parts) == nil {
		var texts []string
		for _, p := range parts {
			if p.Type == "text" {
				texts = append(texts, p.Text)
			}
		}
		m.Content = strings.Join(texts, "")
	}
	return nil
}

// MarshalJSON writes the message with its content as a string.
func (m Message) MarshalJSON() ([]byte, error) {
	type plain Message
	return json.Marshal(struct {
		plain
		Content string `json:"content"`
	}{plain(m), m.Content})
}

// MessageToolCall is a tool call of an assistant message in a request.
type MessageToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// Tool is one tool offered by a request.
type Tool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// ToolNames returns the names of the function tools the request offers.
func (r Request) ToolNames() []string {
	var names []string
	for _, t := range r.Body.Tools {
		if t.Function.Name != "" {
			names = append(names, t.Function.Name)
		}
	}
	return names
}

// Last returns the request's last message (the zero Message when it has
// none).
func (r Request) Last() Message {
	if n := len(r.Body.Messages); n > 0 {
		return r.Body.Messages[n-1]
	}
	return Message{}
}

// Transcript renders the messages as "role: content" lines (tool calls as
// "assistant -> name(arguments)"), for asserting a whole history at once.
func (r Request) Transcript() string {
	var b strings.Builder
	for _, m := range r.Body.Messages {
		if m.Content != "" || len(m.ToolCalls) == 0 {
			b.WriteString(m.Role + ": " + m.Content + "\n")
		}
		for _, c := range m.ToolCalls {
			b.WriteString(m.Role + " -> " + c.Function.Name + "(" + c.Function.Arguments + ")\n")
		}
	}
	return b.String()
}
