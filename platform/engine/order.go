package engine

import (
	"encoding/json"
	"fmt"
	"slices"
)

// ReplyOrder is the order the AI SDK UI message stream protocol imposes on
// one reply's frames, kept as the frames arrive: a text or reasoning part
// is started before its deltas and end, and is not started twice while
// open; a tool call's input is available before its approval request and
// outcome, and a call has one final outcome (preliminary outputs, as of a
// running tool, may come before it). The runner refuses a program's frame
// that breaks it, so that a stray writer of the program's output cannot
// append to a part or a call out of turn, and refuses a completed reply
// whose tool calls are still running. The zero value is a reply before
// its first frame.
type ReplyOrder struct {
	parts map[orderPart]bool   // text and reasoning parts started and not ended
	tools map[string]toolPhase // tool calls by id
}

type orderPart struct{ kind, id string }

// toolPhase is how far a tool call went.
type toolPhase uint8

const (
	toolStreaming toolPhase = iota + 1 // tool-input-start: its input streams
	toolCalled                         // tool-input-available: it runs (or waits for approval)
	toolDone                           // a final outcome
)

// Accept checks that chunk, an AI SDK UI chunk, may come next in the
// reply and records it; it returns why not otherwise (and records
// nothing). Chunks the protocol does not order (steps, data-*, sources)
// are always accepted, as is a chunk that is not JSON (which the runner
// never gets from an adapter).
func (o *ReplyOrder) Accept(chunk json.RawMessage) error {
	var c struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		ToolCallID  string `json:"toolCallId"`
		Preliminary bool   `json:"preliminary"`
	}
	if json.Unmarshal(chunk, &c) != nil {
		return nil
	}
	if o.parts == nil {
		o.parts, o.tools = map[orderPart]bool{}, map[string]toolPhase{}
	}
	switch c.Type {
	case "text-start", "reasoning-start", "text-delta", "reasoning-delta", "text-end", "reasoning-end":
		return o.part(c.Type, c.ID)
	case "tool-input-start":
		if _, seen := o.tools[c.ToolCallID]; seen {
			return fmt.Errorf("%s of tool call %q, which already began", c.Type, c.ToolCallID)
		}
		o.tools[c.ToolCallID] = toolStreaming
	case "tool-input-delta":
		if o.tools[c.ToolCallID] != toolStreaming {
			return fmt.Errorf("%s of tool call %q, whose input is not streaming", c.Type, c.ToolCallID)
		}
	case "tool-input-available", "tool-input-error":
		if p := o.tools[c.ToolCallID]; p > toolStreaming {
			return fmt.Errorf("%s of tool call %q, whose input was already given", c.Type, c.ToolCallID)
		}
		o.tools[c.ToolCallID] = toolCalled
		if c.Type == "tool-input-error" {
			o.tools[c.ToolCallID] = toolDone
		}
	case "tool-approval-request":
		if o.tools[c.ToolCallID] != toolCalled {
			return fmt.Errorf("%s of tool call %q, which is not waiting to run", c.Type, c.ToolCallID)
		}
	case "tool-output-available", "tool-output-error", "tool-output-denied":
		if o.tools[c.ToolCallID] != toolCalled {
			return fmt.Errorf("%s of tool call %q, which is not running (its input was not given, or it has its outcome)", c.Type, c.ToolCallID)
		}
		if !(c.Type == "tool-output-available" && c.Preliminary) {
			o.tools[c.ToolCallID] = toolDone
		}
	}
	return nil
}

// part checks and records a text or reasoning chunk of part id.
func (o *ReplyOrder) part(typ, id string) error {
	kind, stage := typ[:len(typ)-len("-start")], "start"
	switch {
	case typ == "text-delta" || typ == "reasoning-delta":
		kind, stage = typ[:len(typ)-len("-delta")], "delta"
	case typ == "text-end" || typ == "reasoning-end":
		kind, stage = typ[:len(typ)-len("-end")], "end"
	}
	k := orderPart{kind, id}
	switch open := o.parts[k]; {
	case stage == "start" && open:
		return fmt.Errorf("%s of %s part %q, which is already open", typ, kind, id)
	case stage != "start" && !open:
		return fmt.Errorf("%s of %s part %q, which is not open", typ, kind, id)
	case stage == "start":
		o.parts[k] = true
	case stage == "end":
		delete(o.parts, k)
	}
	return nil
}

// Running returns the ids of the tool calls whose input was given and
// that have no final outcome yet, sorted: a reply that ends completed
// with any is out of order.
func (o *ReplyOrder) Running() []string {
	var ids []string
	for id, p := range o.tools {
		if p == toolCalled {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}
