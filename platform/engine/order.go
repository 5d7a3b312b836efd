package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/astrabox/astrabox/platform/wire"
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

type orderPart struct {
	kind wire.PartKind
	id   string
}

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
	switch t := wire.ChunkType(c.Type); t {
	case wire.ChunkTextStart, wire.ChunkTextDelta, wire.ChunkTextEnd:
		return o.part(wire.PartText, t, c.ID)
	case wire.ChunkReasoningStart, wire.ChunkReasoningDelta, wire.ChunkReasoningEnd:
		return o.part(wire.PartReasoning, t, c.ID)
	case wire.ChunkToolInputStart:
		if _, seen := o.tools[c.ToolCallID]; seen {
			return fmt.Errorf("%s of tool call %q, which already began", c.Type, c.ToolCallID)
		}
		o.tools[c.ToolCallID] = toolStreaming
	case wire.ChunkToolInputDelta:
		if o.tools[c.ToolCallID] != toolStreaming {
			return fmt.Errorf("%s of tool call %q, whose input is not streaming", c.Type, c.ToolCallID)
		}
	case wire.ChunkToolInputAvailable, wire.ChunkToolInputError:
		if p := o.tools[c.ToolCallID]; p > toolStreaming {
			return fmt.Errorf("%s of tool call %q, whose input was already given", c.Type, c.ToolCallID)
		}
		o.tools[c.ToolCallID] = toolCalled
		if t == wire.ChunkToolInputError {
			o.tools[c.ToolCallID] = toolDone
		}
	case wire.ChunkToolApproval:
		if o.tools[c.ToolCallID] != toolCalled {
			return fmt.Errorf("%s of tool call %q, which is not waiting to run", c.Type, c.ToolCallID)
		}
	case wire.ChunkToolOutputAvailable, wire.ChunkToolOutputError, wire.ChunkToolOutputDenied:
		if o.tools[c.ToolCallID] != toolCalled {
			return fmt.Errorf("%s of tool call %q, which is not running (its input was not given, or it has its outcome)", c.Type, c.ToolCallID)
		}
		if !(t == wire.ChunkToolOutputAvailable && c.Preliminary) {
			o.tools[c.ToolCallID] = toolDone
		}
	}
	return nil
}

// part checks and records chunk t of part id of kind k.
func (o *ReplyOrder) part(k wire.PartKind, t wire.ChunkType, id string) error {
	key := orderPart{k, id}
	switch open := o.parts[key]; {
	case t == k.Start() && open:
		return fmt.Errorf("%s of %s part %q, which is already open", t, k, id)
	case t != k.Start() && !open:
		return fmt.Errorf("%s of %s part %q, which is not open", t, k, id)
	case t == k.Start():
		o.parts[key] = true
	case t == k.End():
		delete(o.parts, key)
	}
	return nil
}

// PartRef names a text or reasoning part of a reply.
type PartRef struct {
	Kind wire.PartKind
	ID   string
}

// OpenParts returns the text and reasoning parts started and not ended,
// sorted by id.
func (o *ReplyOrder) OpenParts() []PartRef {
	var out []PartRef
	for p, open := range o.parts {
		if open {
			out = append(out, PartRef{Kind: p.kind, ID: p.id})
		}
	}
	slices.SortFunc(out, func(a, b PartRef) int { return strings.Compare(a.ID, b.ID) })
	return out
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
