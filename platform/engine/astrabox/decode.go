package astrabox

import (
	"encoding/json"
	"strings"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
)

// event is one line of the agent's stdout (docs/agent-protocol.md); the
// fields used depend on Type.
type event struct {
	Type           string          `json:"type"`
	ID             string          `json:"id"`
	Name           string          `json:"name"`
	Delta          string          `json:"delta"`
	Input          json.RawMessage `json:"input"`
	Output         json.RawMessage `json:"output"`
	Error          json.RawMessage `json:"error"`
	Reason         string          `json:"reason"`
	State          string          `json:"state"`
	InteractionID  string          `json:"interaction_id"`
	ToolCallID     string          `json:"tool_call_id"`
	InputID        string          `json:"input_id"`
	Outcome        string          `json:"outcome"`
	FinishReason   string          `json:"finish_reason"`
	Usage          engine.Usage    `json:"usage"`
	ConversationID string          `json:"conversation_id"`
	Resumed        bool            `json:"resumed"`
	Inputs         []string        `json:"inputs"`
	Bytes          int64           `json:"bytes"`
	Message        string          `json:"message"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	DelayMS        int64           `json:"delay_ms"`
	AfterOutput    bool            `json:"after_output"`
}

// decoder translates the agent's events into UI chunks and control events.
type decoder struct{}

// Decode implements engine.Decoder.
func (d *decoder) Decode(raw []byte) []engine.Event {
	var ev event
	if err := json.Unmarshal(raw, &ev); err != nil || ev.Type == "" {
		return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
	}
	switch ev.Type {
	case "ready":
		return []engine.Event{
			{Kind: engine.NativeKey, Key: ev.ConversationID, Resumed: ev.Resumed, Consumed: ev.Inputs},
			{Kind: engine.StateChanged, State: engine.StateIdle},
		}
	case "input.received":
		return []engine.Event{{Kind: engine.InputReceived, InputID: ev.ID}}
	case "input.consumed":
		return []engine.Event{{Kind: engine.InputConsumed, InputID: ev.ID}}
	case "state":
		return []engine.Event{{Kind: engine.StateChanged, State: ev.State}}
	case "step.start":
		return []engine.Event{engine.FrameOf(wire.StartStep())}
	case "step.finish":
		return []engine.Event{engine.FrameOf(wire.FinishStep())}
	case "model.retry":
		data := map[string]any{"attempt": ev.Attempt, "maxAttempts": ev.MaxAttempts, "delayMs": ev.DelayMS, "error": errorText(ev.Error)}
		if ev.AfterOutput {
			// What the broken call streamed stays in the message: the
			// mark that the answer starts again stays with it.
			return []engine.Event{engine.FrameOf(wire.Data(wire.DataStepBroken, data))}
		}
		return []engine.Event{engine.FrameOf(wire.Transient(wire.DataRetry, data))}
	case "text.start", "reasoning.start":
		return []engine.Event{engine.FrameOf(wire.PartStart(partKind(ev.Type), ev.ID))}
	case "text.delta", "reasoning.delta":
		return []engine.Event{engine.FrameOf(wire.PartDelta(partKind(ev.Type), ev.ID, ev.Delta))}
	case "text.end", "reasoning.end":
		return []engine.Event{engine.FrameOf(wire.PartEnd(partKind(ev.Type), ev.ID))}
	case "tool.start":
		return []engine.Event{engine.FrameOf(wire.ToolInputStart(ev.ID, ev.Name))}
	case "tool.call":
		return []engine.Event{engine.FrameOf(wire.ToolInputAvailable(ev.ID, ev.Name, ev.Input))}
	case "tool.result":
		return []engine.Event{engine.FrameOf(wire.ToolOutput(ev.ID, ev.Output, false))}
	case "tool.error":
		return []engine.Event{engine.FrameOf(wire.ToolOutputError(ev.ID, errorText(ev.Error)))}
	case "tool.denied":
		return []engine.Event{engine.FrameOf(wire.ToolOutputDenied(ev.ID))}
	case "approval.request":
		return []engine.Event{
			engine.FrameOf(wire.ToolApprovalRequest(ev.InteractionID, ev.ToolCallID)),
			{Kind: engine.InteractionRequested, Interaction: &engine.Interaction{
				ID: ev.InteractionID, Kind: "approval", ToolCallID: ev.ToolCallID, ToolName: ev.Name, Input: ev.Input}},
		}
	case "turn.end":
		end := &engine.ReplyEnd{InputID: ev.InputID, Outcome: ev.Outcome, FinishReason: ev.FinishReason, Usage: ev.Usage}
		if len(ev.Error) > 0 && string(ev.Error) != "null" {
			var e struct{ Code, Message string }
			_ = json.Unmarshal(ev.Error, &e)
			end.ErrorCode, end.ErrorMessage = e.Code, e.Message
		}
		return []engine.Event{{Kind: engine.ReplyEnded, End: end}}
	case "state.saved":
		return []engine.Event{{Kind: engine.StateGrew, Bytes: ev.Bytes}}
	case "log":
		return []engine.Event{{Kind: engine.Diagnostic, Text: ev.Message}}
	}
	return []engine.Event{{Kind: engine.Diagnostic, Text: string(raw)}}
}

// partKind is the part kind of a text.* or reasoning.* event.
func partKind(eventType string) wire.PartKind {
	if strings.HasPrefix(eventType, "reasoning.") {
		return wire.PartReasoning
	}
	return wire.PartText
}

// errorText reads a tool error, a string or {message}.
func errorText(m json.RawMessage) string {
	var s string
	if json.Unmarshal(m, &s) == nil {
		return s
	}
	var e struct{ Message string }
	if json.Unmarshal(m, &e) == nil && e.Message != "" {
		return e.Message
	}
	return string(m)
}
