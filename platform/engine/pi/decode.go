package pi

import (
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
)

// event is one line of pi's RPC output (its docs/rpc.md); the fields used
// depend on Type.
type event struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Command string `json:"command"`
	Success *bool  `json:"success"`
	Error   string `json:"error"`
	Data    struct {
		SessionID   string `json:"sessionId"`
		IsStreaming bool   `json:"isStreaming"`
	} `json:"data"`
	Message *message `json:"message"`
	Update  *struct {
		Type         string    `json:"type"`
		ContentIndex int       `json:"contentIndex"`
		Delta        string    `json:"delta"`
		ToolCall     *toolCall `json:"toolCall"`
		Partial      *message  `json:"partial"`
	} `json:"assistantMessageEvent"`
	ToolCallID    string          `json:"toolCallId"`
	ToolName      string          `json:"toolName"`
	Result        json.RawMessage `json:"result"`
	PartialResult json.RawMessage `json:"partialResult"`
	IsError       bool            `json:"isError"`
	// auto_retry_* and compaction_*
	Attempt      int    `json:"attempt"`
	MaxAttempts  int    `json:"maxAttempts"`
	DelayMs      int64  `json:"delayMs"`
	ErrorMessage string `json:"errorMessage"`
	FinalError   string `json:"finalError"`
	Reason       string `json:"reason"`
	Aborted      bool   `json:"aborted"`
	WillRetry    bool   `json:"willRetry"`
}

// message is an AgentMessage as far as the adapter reads it.
type message struct {
	Role         string          `json:"role"`
	Content      json.RawMessage `json:"content"`
	StopReason   string          `json:"stopReason"`
	ErrorMessage string          `json:"errorMessage"`
	Usage        struct {
		Input  int64 `json:"input"`
		Output int64 `json:"output"`
	} `json:"usage"`
}

type toolCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// retryable is pi 0.73's own test for an error it retries by itself
// (AgentSession._isRetryableError): after such an agent_end, pi emits
// auto_retry_start (the reply goes on) or auto_retry_end (it gave up).
var retryable = regexp.MustCompile(`(?i)overloaded|provider.?returned.?error|rate.?limit|too many requests|429|500|502|503|504|service.?unavailable|server.?error|internal.?error|network.?error|connection.?error|connection.?refused|connection.?lost|websocket.?closed|websocket.?error|other side closed|fetch failed|upstream.?connect|reset before headers|socket hang up|ended without|http2 request did not get a response|timed? out|timeout|terminated|retry delay`)

// finishReasons maps pi's stop reasons onto the runner's finish reasons.
var finishReasons = map[string]string{"stop": "stop", "length": "length", "toolUse": "tool-calls"}

// decoder translates pi's events. pi does not name inputs in its events:
// the response to a prompt carries the input's id (the command's id), and
// the user message that starts a reply is matched to the oldest input pi
// accepted. A decoder that starts mid-run (a re-attach) has not seen those
// responses and reports the consumed input with no id; the runner then
// takes the oldest input it delivered, which is the same one, since pi is
// handed one input at a time.
type decoder struct {
	accepted []string // inputs pi accepted and has not started, oldest first
	open     bool     // a reply is in progress
	aborted  bool     // an abort was acknowledged during it
	// awaitingRetry: the reply's last model call failed with an error pi
	// retries, so its agent_end does not end the reply.
	awaitingRetry bool
	step          int                      // assistant messages so far, for part ids
	parts         map[string]wire.PartKind // open part ids and their kinds
	toolNames     map[string]string
	usage         engine.Usage
	last          *message // the reply's last assistant message
}

func newDecoder() *decoder {
	return &decoder{parts: map[string]wire.PartKind{}, toolNames: map[string]string{}}
}

// ResumeReply implements engine.ReplyResumer: a reply is in progress,
// with open (recorded) parts, which pi's next message end closes. Its
// steps are numbered on from the open parts' so no id is reused.
func (d *decoder) ResumeReply(open []engine.PartRef) {
	d.open = true
	for _, p := range open {
		d.parts[p.ID] = p.Kind
		if n, ok := partStep(p.ID); ok {
			d.step = max(d.step, n)
		}
	}
}

// partStep is the step number of a part id this decoder makes, "m<step>-…".
func partStep(id string) (int, bool) {
	rest, ok := strings.CutPrefix(id, "m")
	if !ok {
		return 0, false
	}
	num, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil
}

// Decode implements engine.Decoder.
func (d *decoder) Decode(raw []byte) []engine.Event {
	var ev event
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Type == "" {
		return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
	}
	switch ev.Type {
	case "response":
		return d.response(ev, raw)
	case "agent_start":
		return []engine.Event{{Kind: engine.StateChanged, State: engine.StateWorking}}
	case "message_start":
		return d.messageStart(ev)
	case "message_update":
		return d.update(ev, raw)
	case "message_end":
		return d.messageEnd(ev)
	case "tool_execution_update":
		return []engine.Event{engine.FrameOf(wire.ToolOutput(ev.ToolCallID, ev.PartialResult, true))}
	case "tool_execution_end":
		if ev.IsError {
			return []engine.Event{engine.FrameOf(wire.ToolOutputError(ev.ToolCallID, resultText(ev.Result)))}
		}
		return []engine.Event{engine.FrameOf(wire.ToolOutput(ev.ToolCallID, ev.Result, false))}
	case "turn_end":
		// pi has appended the turn's messages to its session file.
		return []engine.Event{{Kind: engine.StateGrew}}
	case "agent_end":
		return d.agentEnd()
	case "auto_retry_start":
		d.awaitingRetry = false
		return []engine.Event{engine.FrameOf(wire.Transient(wire.DataRetry, map[string]any{
			"attempt": ev.Attempt, "maxAttempts": ev.MaxAttempts, "delayMs": ev.DelayMs, "error": ev.ErrorMessage}))}
	case "auto_retry_end":
		if ev.Success != nil && !*ev.Success && d.open {
			d.awaitingRetry = false
			msg := ev.FinalError
			if msg == "" && d.last != nil {
				msg = d.last.ErrorMessage
			}
			return d.end(engine.OutcomeFailed, "MODEL_ERROR", msg)
		}
		return nil
	case "compaction_start":
		return []engine.Event{engine.FrameOf(wire.Transient(wire.DataCompaction, map[string]any{"phase": "start", "reason": ev.Reason}))}
	case "compaction_end":
		return []engine.Event{engine.FrameOf(wire.Transient(wire.DataCompaction,
			map[string]any{"phase": "end", "reason": ev.Reason, "aborted": ev.Aborted, "willRetry": ev.WillRetry, "error": ev.ErrorMessage}))}
	case "turn_start", "tool_execution_start", "queue_update":
		// Known, and nothing to show: a turn is a step (message_start), a
		// tool's start follows its input (toolcall_end), and the runner
		// keeps the queue.
		return nil
	}
	// extension_error, extension_ui_request (extensions are off) and
	// anything newer than this adapter.
	return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
}

// response handles a command's response: a prompt's acknowledges the
// input, get_state's names the session.
func (d *decoder) response(ev event, raw []byte) []engine.Event {
	ok := ev.Success != nil && *ev.Success
	switch {
	case ev.Command == "get_state" && ok:
		out := []engine.Event{{Kind: engine.NativeKey, Key: ev.Data.SessionID}}
		if !ev.Data.IsStreaming && !d.open {
			out = append(out, engine.Event{Kind: engine.StateChanged, State: engine.StateIdle})
		}
		return out
	case ev.Command == "prompt" && ok && ev.ID != "":
		d.accepted = append(d.accepted, ev.ID)
		return []engine.Event{{Kind: engine.InputReceived, InputID: ev.ID}}
	case ev.Command == "prompt" && ev.ID != "" && !d.open:
		// Refused before it started: a reply that fails at once.
		return []engine.Event{{Kind: engine.InputConsumed, InputID: ev.ID},
			{Kind: engine.ReplyEnded, End: &engine.ReplyEnd{InputID: ev.ID, Outcome: engine.OutcomeFailed,
				ErrorCode: "PROGRAM_REJECTED", ErrorMessage: "pi refused the input: " + ev.Error}}}
	case ev.Command == "abort" && ok:
		d.aborted = d.open
		return nil
	}
	return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
}

// messageStart opens a reply at a user message and a step at an
// assistant's.
func (d *decoder) messageStart(ev event) []engine.Event {
	if ev.Message == nil {
		return nil
	}
	switch ev.Message.Role {
	case "user":
		var out []engine.Event
		if d.open {
			out = d.end(engine.OutcomeCompleted, "", "") // a follow-up pi ran in the same run
		}
		id := ""
		if len(d.accepted) > 0 {
			id, d.accepted = d.accepted[0], d.accepted[1:]
		}
		d.open, d.aborted, d.awaitingRetry, d.usage, d.last = true, false, false, engine.Usage{}, nil
		return append(out, engine.Event{Kind: engine.InputConsumed, InputID: id})
	case "assistant":
		d.step++
		return []engine.Event{engine.FrameOf(wire.StartStep())}
	}
	return nil // tool results and pi's own records
}

// update translates a streaming delta of an assistant message.
func (d *decoder) update(ev event, raw []byte) []engine.Event {
	u := ev.Update
	if u == nil {
		return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
	}
	text := "m" + strconv.Itoa(d.step) + "-t" + strconv.Itoa(u.ContentIndex)
	thinking := "m" + strconv.Itoa(d.step) + "-r" + strconv.Itoa(u.ContentIndex)
	switch u.Type {
	case "start", "done", "error":
		return nil // the message's own boundaries are message_start/end
	case "text_start":
		return d.openPart(wire.PartText, text)
	case "text_delta":
		return append(d.openPart(wire.PartText, text), engine.FrameOf(wire.PartDelta(wire.PartText, text, u.Delta)))
	case "text_end":
		return d.close(text)
	case "thinking_start":
		return d.openPart(wire.PartReasoning, thinking)
	case "thinking_delta":
		return append(d.openPart(wire.PartReasoning, thinking), engine.FrameOf(wire.PartDelta(wire.PartReasoning, thinking, u.Delta)))
	case "thinking_end":
		return d.close(thinking)
	case "toolcall_start":
		tc := partialToolCall(u.Partial, u.ContentIndex)
		if tc == nil || tc.ID == "" {
			return nil // named by toolcall_end
		}
		d.toolNames[tc.ID] = tc.Name
		return []engine.Event{engine.FrameOf(wire.ToolInputStart(tc.ID, tc.Name))}
	case "toolcall_delta":
		tc := partialToolCall(u.Partial, u.ContentIndex)
		if tc == nil || d.toolNames[tc.ID] == "" {
			return nil
		}
		return []engine.Event{engine.FrameOf(wire.ToolInputDelta(tc.ID, u.Delta))}
	case "toolcall_end":
		if u.ToolCall == nil {
			return nil
		}
		var out []engine.Event
		if _, started := d.toolNames[u.ToolCall.ID]; !started {
			d.toolNames[u.ToolCall.ID] = u.ToolCall.Name
			out = append(out, engine.FrameOf(wire.ToolInputStart(u.ToolCall.ID, u.ToolCall.Name)))
		}
		return append(out, engine.FrameOf(wire.ToolInputAvailable(u.ToolCall.ID, u.ToolCall.Name, u.ToolCall.Arguments)))
	}
	return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
}

// openPart starts a text or reasoning part unless it is open already (a
// delta pi sent without its start opens it too).
func (d *decoder) openPart(kind wire.PartKind, id string) []engine.Event {
	if d.parts[id] != "" {
		return nil
	}
	d.parts[id] = kind
	return []engine.Event{engine.FrameOf(wire.PartStart(kind, id))}
}

// close ends an open part.
func (d *decoder) close(id string) []engine.Event {
	kind := d.parts[id]
	if kind == "" {
		return nil
	}
	delete(d.parts, id)
	return []engine.Event{engine.FrameOf(wire.PartEnd(kind, id))}
}

// messageEnd closes an assistant message's step and keeps its outcome.
func (d *decoder) messageEnd(ev event) []engine.Event {
	if ev.Message == nil || ev.Message.Role != "assistant" {
		return nil
	}
	m := ev.Message
	d.last = m
	d.usage.InputTokens += m.Usage.Input
	d.usage.OutputTokens += m.Usage.Output
	out := d.closeParts()
	if m.StopReason == "error" && m.ErrorMessage != "" {
		out = append(out, engine.FrameOf(wire.Transient(wire.DataModelError, map[string]any{"message": m.ErrorMessage})))
	}
	return append(out, engine.FrameOf(wire.FinishStep()))
}

// closeParts ends the parts pi left open (an aborted message).
func (d *decoder) closeParts() []engine.Event {
	ids := make([]string, 0, len(d.parts))
	for id := range d.parts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []engine.Event
	for _, id := range ids {
		out = append(out, d.close(id)...)
	}
	return out
}

// agentEnd ends the reply, unless pi is about to retry its last model call.
func (d *decoder) agentEnd() []engine.Event {
	idle := engine.Event{Kind: engine.StateChanged, State: engine.StateIdle}
	if !d.open {
		return []engine.Event{idle}
	}
	if d.last != nil && d.last.StopReason == "error" && retryable.MatchString(d.last.ErrorMessage) && !d.aborted {
		d.awaitingRetry = true
		return nil
	}
	switch {
	case d.aborted || (d.last != nil && d.last.StopReason == "aborted"):
		return append(d.end(engine.OutcomeInterrupted, "", ""), idle)
	case d.last != nil && d.last.StopReason == "error":
		return append(d.end(engine.OutcomeFailed, "MODEL_ERROR", d.last.ErrorMessage), idle)
	}
	return append(d.end(engine.OutcomeCompleted, "", ""), idle)
}

// end closes the reply in progress.
func (d *decoder) end(outcome, code, msg string) []engine.Event {
	out := d.closeParts()
	end := &engine.ReplyEnd{Outcome: outcome, Usage: d.usage, ErrorCode: code, ErrorMessage: msg}
	if d.last != nil {
		end.FinishReason = finishReasons[d.last.StopReason]
	}
	d.open, d.aborted, d.awaitingRetry, d.last = false, false, false, nil
	clear(d.toolNames)
	return append(out, engine.Event{Kind: engine.ReplyEnded, End: end})
}

// partialToolCall returns the tool call at index i of a partial message.
func partialToolCall(m *message, i int) *toolCall {
	if m == nil {
		return nil
	}
	var content []json.RawMessage
	if json.Unmarshal(m.Content, &content) != nil || i < 0 || i >= len(content) {
		return nil
	}
	var tc struct {
		Type string `json:"type"`
		toolCall
	}
	if json.Unmarshal(content[i], &tc) != nil || tc.Type != "toolCall" {
		return nil
	}
	return &tc.toolCall
}

// resultText joins the text blocks of a tool result.
func resultText(raw json.RawMessage) string {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if json.Unmarshal(raw, &r) != nil {
		return string(raw)
	}
	var b strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}
