package platform

import (
	"encoding/json"
	"strings"

	"github.com/astrabox/astrabox/store"
)

// UIMessage is an AI SDK UI message folded from the log.
type UIMessage struct {
	ID       string           `json:"id"`
	Role     string           `json:"role"`
	Metadata map[string]any   `json:"metadata,omitempty"`
	Parts    []map[string]any `json:"parts"`
}

// FoldMessages folds a Session's log into UI messages: a user message per
// accepted input (its id is the input id) and an assistant message per
// reply (its id the reply's messageId), in log order.
func FoldMessages(entries []store.LogEntry) []UIMessage {
	var msgs []UIMessage
	byTurn := map[string]int{}
	type partRef struct{ msg, part int }
	texts := map[string]partRef{} // turn + part id -> text/reasoning part
	tools := map[string]partRef{} // toolCallId -> tool part
	for _, e := range entries {
		if e.Type == "input.accepted" {
			var p struct {
				Content string `json:"content"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			msgs = append(msgs, UIMessage{ID: e.InputID, Role: "user", Metadata: map[string]any{"turn_id": e.TurnID},
				Parts: []map[string]any{{"type": "text", "text": p.Content}}})
			continue
		}
		if !IsFrame(e) || e.TurnID == "" {
			continue
		}
		var c map[string]any
		if json.Unmarshal(e.Payload, &c) != nil {
			continue
		}
		mi, ok := byTurn[e.TurnID]
		if !ok {
			msgs = append(msgs, UIMessage{ID: e.MessageID, Role: "assistant",
				Metadata: map[string]any{"turn_id": e.TurnID, "input_id": e.InputID}, Parts: []map[string]any{}})
			mi = len(msgs) - 1
			byTurn[e.TurnID] = mi
		}
		m := &msgs[mi]
		id, _ := c["id"].(string)
		callID, _ := c["toolCallId"].(string)
		switch t, _ := c["type"].(string); t {
		case "start-step":
			m.Parts = append(m.Parts, map[string]any{"type": "step-start"})
		case "text-start", "reasoning-start":
			kind := "text"
			if t == "reasoning-start" {
				kind = "reasoning"
			}
			m.Parts = append(m.Parts, map[string]any{"type": kind, "text": "", "state": "streaming"})
			texts[e.TurnID+"/"+kind+"/"+id] = partRef{mi, len(m.Parts) - 1}
		case "text-delta", "reasoning-delta":
			kind := "text"
			if t == "reasoning-delta" {
				kind = "reasoning"
			}
			if ref, ok := texts[e.TurnID+"/"+kind+"/"+id]; ok {
				p := msgs[ref.msg].Parts[ref.part]
				d, _ := c["delta"].(string)
				p["text"] = p["text"].(string) + d
			}
		case "text-end", "reasoning-end":
			kind := "text"
			if t == "reasoning-end" {
				kind = "reasoning"
			}
			if ref, ok := texts[e.TurnID+"/"+kind+"/"+id]; ok {
				msgs[ref.msg].Parts[ref.part]["state"] = "done"
			}
		case "tool-input-start":
			m.Parts = append(m.Parts, map[string]any{"type": "dynamic-tool", "toolName": c["toolName"], "toolCallId": callID,
				"state": "input-streaming", "input": nil})
			tools[callID] = partRef{mi, len(m.Parts) - 1}
		case "tool-input-available":
			ref, ok := tools[callID]
			if !ok {
				m.Parts = append(m.Parts, map[string]any{"type": "dynamic-tool", "toolName": c["toolName"], "toolCallId": callID})
				ref = partRef{mi, len(m.Parts) - 1}
				tools[callID] = ref
			}
			p := msgs[ref.msg].Parts[ref.part]
			p["state"], p["input"] = "input-available", c["input"]
		case "tool-approval-request":
			if ref, ok := tools[callID]; ok {
				p := msgs[ref.msg].Parts[ref.part]
				p["state"], p["approval"] = "approval-requested", map[string]any{"id": c["approvalId"]}
			}
		case "tool-output-available":
			if ref, ok := tools[callID]; ok {
				p := msgs[ref.msg].Parts[ref.part]
				p["state"], p["output"] = "output-available", c["output"]
			}
		case "tool-output-error":
			if ref, ok := tools[callID]; ok {
				p := msgs[ref.msg].Parts[ref.part]
				p["state"], p["errorText"] = "output-error", c["errorText"]
			}
		case "tool-output-denied":
			if ref, ok := tools[callID]; ok {
				msgs[ref.msg].Parts[ref.part]["state"] = "output-denied"
			}
		case "data-turn-accepted":
			// Before the reply's start frame: a client's message begins
			// after it, so it is no part of the message.
		default:
			if strings.HasPrefix(t, "data-") && c["transient"] != true {
				part := map[string]any{"type": t, "data": c["data"]}
				if id, ok := c["id"].(string); ok {
					part["id"] = id
				}
				m.Parts = append(m.Parts, part)
			}
		}
		if c["type"] == "finish" {
			m.Metadata["finish_reason"] = c["finishReason"]
		}
	}
	return msgs
}
