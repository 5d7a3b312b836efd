package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// Bounds of one page of a Session's messages (ReadMessages): the most log
// entries it folds, and the most payload bytes they hold.
const (
	MessagesPageEntries = 20_000
	MessagesPageBytes   = 16 << 20
)

// PageLimits bound what one page of messages folds: at most Entries log
// entries (under 1 counts as 1) whose payloads total at most Bytes, except
// that a page always holds its newest entry, however large.
type PageLimits struct {
	Entries, Bytes int64
}

// DefaultPageLimits are the limits of a page served by the API.
func DefaultPageLimits() PageLimits {
	return PageLimits{Entries: MessagesPageEntries, Bytes: MessagesPageBytes}
}

// LogReader reads a log stream; store.Streams is one.
type LogReader interface {
	ReadStream(ctx context.Context, stream string, afterSeq, limit int64) ([]store.LogEntry, error)
	StreamHead(ctx context.Context, stream string) (int64, error)
}

// readChunk is how many entries ReadMessages reads from the store at once.
const readChunk = 1000

// ReadMessages folds one page of a log's conversation: the newest entries
// with a seq below before (0: up to the log's head) that lim allows. A page
// that does not reach back to the log's first entry starts at the first
// reply that starts in it, so that a message is on one page only, and
// whole: the entries before that are the earlier page's, read with before
// set to this page's FirstSeq. The exception is a reply longer than a
// page: it is split, and its message is on each page it spans (the same
// id), with the parts that page holds (a page's first text part may begin
// mid-text). Reading pages back to FirstSeq 1 and joining them oldest
// first, a message's parts and metadata on later pages added to those of
// its first, gives FoldMessages of the whole log (but for the text of a
// split reply, which may be in two parts).
func ReadMessages(ctx context.Context, r LogReader, stream string, before int64, lim PageLimits) (wire.Transcript, error) {
	head, err := r.StreamHead(ctx, stream)
	if err != nil {
		return wire.Transcript{}, fmt.Errorf("read messages: %w", err)
	}
	if before > 0 && before-1 < head {
		head = before - 1
	}
	entries, err := readTail(ctx, r, stream, head, lim)
	if err != nil {
		return wire.Transcript{}, fmt.Errorf("read messages: %w", err)
	}
	if len(entries) > 0 && entries[0].Seq > 1 {
		entries = fromReplyStart(entries)
	}
	page := wire.Transcript{Messages: FoldMessages(entries)}
	if page.Messages == nil {
		page.Messages = []wire.UIMessage{}
	}
	if n := len(entries); n > 0 {
		page.FirstSeq, page.LastSeq = entries[0].Seq, entries[n-1].Seq
	}
	return page, nil
}

// readTail returns the newest entries of stream up to seq hi that lim
// allows, in order. It reads backwards a chunk at a time, so it never holds
// more than a chunk beyond the limits.
func readTail(ctx context.Context, r LogReader, stream string, hi int64, lim PageLimits) ([]store.LogEntry, error) {
	var (
		chunks      [][]store.LogEntry // newest first
		count, size int64
		full        bool
	)
	lim.Entries = max(lim.Entries, 1)
	for lo := hi; lo > 0 && !full && count < lim.Entries; {
		k := min(readChunk, lo, lim.Entries-count)
		es, err := r.ReadStream(ctx, stream, lo-k, k)
		if err != nil {
			return nil, err
		}
		i := len(es)
		for ; i > 0; i-- {
			n := int64(len(es[i-1].Payload))
			if count > 0 && size+n > lim.Bytes {
				full = true
				break
			}
			count, size = count+1, size+n
		}
		chunks = append(chunks, es[i:])
		if int64(len(es)) < k {
			break // the stream ended (deleted meanwhile)
		}
		lo -= k
	}
	out := make([]store.LogEntry, 0, count)
	for i := len(chunks) - 1; i >= 0; i-- {
		out = append(out, chunks[i]...)
	}
	return out, nil
}

// fromReplyStart drops the entries before the first reply's start frame
// (data-turn-accepted), if there is one: they end a reply, and hold the
// inputs, of an earlier page.
func fromReplyStart(entries []store.LogEntry) []store.LogEntry {
	for i, e := range entries {
		if e.Type == "data-turn-accepted" {
			return entries[i:]
		}
	}
	return entries
}

// FoldMessages folds a Session's log into UI messages: a user message per
// accepted input (its id is the input id) and an assistant message per
// reply (its id the reply's messageId), in log order. Its time and memory
// are linear in the entries' size. A text or reasoning delta whose part
// has no start in entries (they begin inside a reply) opens the part.
func FoldMessages(entries []store.LogEntry) []wire.UIMessage {
	f := folder{byTurn: map[string]int{}, texts: map[textKey]*textPart{}, tools: map[string]map[string]any{}}
	for _, e := range entries {
		f.add(e)
	}
	return f.done()
}

// folder is FoldMessages' state. Parts are maps, so a part found in texts
// or tools is the one in msgs.
type folder struct {
	msgs   []wire.UIMessage
	byTurn map[string]int // turn id -> assistant message
	texts  map[textKey]*textPart
	// all is every text part, in order, for done to write their texts.
	all   []*textPart
	tools map[string]map[string]any // toolCallId -> tool part
}

// textKey names a text or reasoning part: its turn, kind and part id.
type textKey struct {
	turn string
	kind wire.PartKind
	id   string
}

// textPart is a text or reasoning part and its text so far: the deltas
// are gathered in b and the part's "text" set once, by done.
type textPart struct {
	part map[string]any
	b    strings.Builder
}

func (f *folder) add(e store.LogEntry) {
	if e.Type == "input.accepted" {
		var p struct {
			Content string `json:"content"`
		}
		_ = json.Unmarshal(e.Payload, &p)
		f.msgs = append(f.msgs, wire.UIMessage{ID: e.InputID, Role: "user", Metadata: map[string]any{"turn_id": e.TurnID},
			Parts: []map[string]any{{"type": "text", "text": p.Content}}})
		return
	}
	if !IsFrame(e) || e.TurnID == "" {
		return
	}
	var c map[string]any
	if json.Unmarshal(e.Payload, &c) != nil {
		return
	}
	f.frame(f.assistant(e), e.TurnID, c)
}

// assistant returns the message of e's reply, opening it on its first
// frame.
func (f *folder) assistant(e store.LogEntry) *wire.UIMessage {
	mi, ok := f.byTurn[e.TurnID]
	if !ok {
		f.msgs = append(f.msgs, wire.UIMessage{ID: e.MessageID, Role: "assistant",
			Metadata: map[string]any{"turn_id": e.TurnID, "input_id": e.InputID}, Parts: []map[string]any{}})
		mi = len(f.msgs) - 1
		f.byTurn[e.TurnID] = mi
	}
	return &f.msgs[mi]
}

// frame folds one frame c of turn into its message m.
func (f *folder) frame(m *wire.UIMessage, turn string, c map[string]any) {
	t := wire.Chunk(c).Type()
	if kind, phase, ok := textFrame(t); ok {
		id, _ := c["id"].(string)
		f.text(m, textKey{turn, kind, id}, phase, c)
		return
	}
	callID, _ := c["toolCallId"].(string)
	switch t {
	case wire.ChunkStartStep:
		m.Parts = append(m.Parts, map[string]any{"type": "step-start"})
	case wire.ChunkToolInputStart:
		f.tools[callID] = addPart(m, map[string]any{"type": "dynamic-tool", "toolName": c["toolName"], "toolCallId": callID,
			"state": "input-streaming", "input": nil})
	case wire.ChunkToolInputAvailable:
		p, ok := f.tools[callID]
		if !ok {
			p = addPart(m, map[string]any{"type": "dynamic-tool", "toolName": c["toolName"], "toolCallId": callID})
			f.tools[callID] = p
		}
		p["state"], p["input"] = "input-available", c["input"]
	case wire.ChunkToolApproval:
		if p, ok := f.tools[callID]; ok {
			p["state"], p["approval"] = "approval-requested", map[string]any{"id": c["approvalId"]}
		}
	case wire.ChunkToolOutputAvailable:
		if p, ok := f.tools[callID]; ok {
			p["state"], p["output"] = "output-available", c["output"]
		}
	case wire.ChunkToolOutputError:
		if p, ok := f.tools[callID]; ok {
			p["state"], p["errorText"] = "output-error", c["errorText"]
		}
	case wire.ChunkToolOutputDenied:
		if p, ok := f.tools[callID]; ok {
			p["state"] = "output-denied"
		}
	case wire.DataTurnAccepted:
		// Before the reply's start frame: a client's message begins
		// after it, so it is no part of the message.
	case wire.ChunkFinish:
		m.Metadata["finish_reason"] = c["finishReason"]
	default:
		if t.IsData() && c["transient"] != true {
			part := map[string]any{"type": t, "data": c["data"]}
			if id, ok := c["id"].(string); ok {
				part["id"] = id
			}
			m.Parts = append(m.Parts, part)
		}
	}
}

// textFrame splits a text or reasoning frame's type ("reasoning-delta")
// into the part's kind and the frame's phase (start, delta or end).
func textFrame(t wire.ChunkType) (kind wire.PartKind, phase string, ok bool) {
	for _, k := range []wire.PartKind{wire.PartText, wire.PartReasoning} {
		switch t {
		case k.Start():
			return k, "start", true
		case k.Delta():
			return k, "delta", true
		case k.End():
			return k, "end", true
		}
	}
	return "", "", false
}

// text folds a text or reasoning frame c of part k into m.
func (f *folder) text(m *wire.UIMessage, k textKey, phase string, c map[string]any) {
	tp, ok := f.texts[k]
	if phase == "start" || (phase == "delta" && !ok) {
		tp = &textPart{part: addPart(m, map[string]any{"type": k.kind, "text": "", "state": "streaming"})}
		f.texts[k], f.all = tp, append(f.all, tp)
		ok = true
	}
	if !ok {
		return
	}
	switch phase {
	case "delta":
		d, _ := c["delta"].(string)
		tp.b.WriteString(d)
	case "end":
		tp.part["state"] = "done"
	}
}

// addPart appends p to m's parts and returns it.
func addPart(m *wire.UIMessage, p map[string]any) map[string]any {
	m.Parts = append(m.Parts, p)
	return p
}

// done writes each text part's text and returns the messages.
func (f *folder) done() []wire.UIMessage {
	for _, tp := range f.all {
		tp.part["text"] = tp.b.String()
	}
	return f.msgs
}
