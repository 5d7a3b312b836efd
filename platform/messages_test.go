package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"runtime"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// replyLog is a log of one input and its reply: n deltas of a text part
// (each delta the same 32 bytes), then the reply's end.
func replyLog(n int) []store.LogEntry {
	e := func(typ, payload string) store.LogEntry {
		return store.LogEntry{Type: typ, TurnID: "t", InputID: "in_t", MessageID: "msg_t", Payload: json.RawMessage(payload)}
	}
	log := []store.LogEntry{
		e("input.accepted", `{"content":"write a long answer"}`),
		e("data-turn-accepted", `{"type":"data-turn-accepted","data":{"turnId":"t"}}`),
		e("start", `{"type":"start","messageId":"msg_t"}`),
		e("text-start", `{"type":"text-start","id":"t1"}`),
	}
	delta := e("text-delta", `{"type":"text-delta","id":"t1","delta":"`+strings.Repeat("x", 32)+`"}`)
	for range n {
		log = append(log, delta)
	}
	log = append(log, e("text-end", `{"type":"text-end","id":"t1"}`), e("finish", `{"type":"finish","finishReason":"stop"}`))
	for i := range log {
		log[i].Seq = int64(i + 1)
	}
	return log
}

// foldBytes returns the bytes FoldMessages allocates folding log.
func foldBytes(log []store.LogEntry) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	msgs := FoldMessages(log)
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(msgs)
	return after.TotalAlloc - before.TotalAlloc
}

// TestFoldMessagesIsLinear: folding twice the deltas allocates about twice
// the bytes. Joining each delta onto the text so far copies the text on
// every delta, which quadruples the bytes instead.
func TestFoldMessagesIsLinear(t *testing.T) {
	const n = 4000
	small, large := replyLog(n), replyLog(2*n)
	if got := FoldMessages(large)[1].Parts[0]["text"]; got != strings.Repeat("x", 32*2*n) {
		t.Fatalf("folded text is %d bytes, want %d", len(got.(string)), 32*2*n)
	}
	a, b := foldBytes(small), foldBytes(large)
	if ratio := float64(b) / float64(a); ratio > 2.5 {
		t.Fatalf("folding %d deltas allocated %d bytes, %d deltas %d bytes: %.1f times as many", n, a, 2*n, b, ratio)
	}
}

// BenchmarkFoldMessages folds one reply of 1,000 and of 16,000 deltas.
func BenchmarkFoldMessages(b *testing.B) {
	for _, n := range []int{1000, 16000} {
		log := replyLog(n)
		b.Run(fmt.Sprintf("deltas=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				FoldMessages(log)
			}
		})
	}
}

// sliceLog is a LogReader over one stream's entries (seq i+1 at index i)
// that counts the entries it hands out.
type sliceLog struct {
	entries []store.LogEntry
	read    int64
}

func (l *sliceLog) ReadStream(_ context.Context, _ string, after, limit int64) ([]store.LogEntry, error) {
	hi := int64(len(l.entries))
	if limit > 0 {
		hi = min(hi, after+limit)
	}
	if after >= hi {
		return nil, nil
	}
	l.read += hi - after
	return l.entries[after:hi], nil
}

func (l *sliceLog) StreamHead(context.Context, string) (int64, error) {
	return int64(len(l.entries)), nil
}

// conversation is a log of three inputs and their replies; the third
// input is accepted while the second reply runs.
func conversation() []store.LogEntry {
	var log []store.LogEntry
	add := func(typ, turn, payload string) {
		log = append(log, store.LogEntry{Seq: int64(len(log) + 1), Type: typ, TurnID: turn, InputID: "in_" + turn,
			MessageID: "msg_" + turn, Payload: json.RawMessage(payload)})
	}
	reply := func(turn string, deltas ...string) {
		add("data-turn-accepted", turn, `{"type":"data-turn-accepted","data":{"turnId":"`+turn+`"}}`)
		add("start", turn, `{"type":"start","messageId":"msg_`+turn+`"}`)
		add("reasoning-start", turn, `{"type":"reasoning-start","id":"r"}`)
		add("reasoning-delta", turn, `{"type":"reasoning-delta","id":"r","delta":"hmm"}`)
		add("reasoning-end", turn, `{"type":"reasoning-end","id":"r"}`)
		add("text-start", turn, `{"type":"text-start","id":"t"}`)
		for _, d := range deltas {
			add("text-delta", turn, `{"type":"text-delta","id":"t","delta":"`+d+`"}`)
		}
		add("text-end", turn, `{"type":"text-end","id":"t"}`)
		add("tool-input-available", turn, `{"type":"tool-input-available","toolCallId":"c_`+turn+`","toolName":"shell","input":{}}`)
		add("tool-output-available", turn, `{"type":"tool-output-available","toolCallId":"c_`+turn+`","output":"ok"}`)
	}
	finish := func(turn string) {
		add("finish", turn, `{"type":"finish","finishReason":"stop"}`)
		add("turn.ended", turn, `{"outcome":"completed"}`)
	}
	add("input.accepted", "a", `{"content":"one"}`)
	reply("a", "Hel", "lo")
	finish("a")
	add("input.accepted", "b", `{"content":"two"}`)
	reply("b", "a ", "longer ", "answer")
	add("input.accepted", "c", `{"content":"three"}`)
	finish("b")
	reply("c", "bye")
	finish("c")
	return log
}

// readAll reads every page of log, newest first, with lim, checking that
// each is within it, and returns them oldest first.
func readAll(t *testing.T, log []store.LogEntry, lim PageLimits) []wire.Transcript {
	t.Helper()
	r := &sliceLog{entries: log}
	var pages []wire.Transcript
	var before int64
	for range len(log) + 1 {
		r.read = 0
		p, err := ReadMessages(context.Background(), r, "s", before, lim)
		if err != nil {
			t.Fatal(err)
		}
		if r.read > lim.Entries {
			t.Fatalf("a page read %d entries, limit %d", r.read, lim.Entries)
		}
		if p.FirstSeq == 0 || p.LastSeq-p.FirstSeq+1 > lim.Entries || (before > 0 && p.LastSeq != before-1) {
			t.Fatalf("page before %d: seqs %d to %d, limit %d", before, p.FirstSeq, p.LastSeq, lim.Entries)
		}
		pages = append([]wire.Transcript{p}, pages...)
		if p.FirstSeq == 1 {
			return pages
		}
		before = p.FirstSeq
	}
	t.Fatal("the pages never reached the log's start")
	return nil
}

// joinPages joins pages, oldest first: a message on several pages (a
// reply split between them) is one, with the parts and metadata of each.
func joinPages(pages []wire.Transcript) []wire.UIMessage {
	var msgs []wire.UIMessage
	at := map[string]int{}
	for _, p := range pages {
		for _, m := range p.Messages {
			i, ok := at[m.ID]
			if !ok {
				at[m.ID] = len(msgs)
				msgs = append(msgs, m)
				continue
			}
			msgs[i].Parts = append(msgs[i].Parts, m.Parts...)
			maps.Copy(msgs[i].Metadata, m.Metadata)
		}
	}
	return msgs
}

func messagesJSON(t *testing.T, msgs []wire.UIMessage) string {
	t.Helper()
	b, err := json.Marshal(msgs)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReadMessagesPages: a log read a page at a time, with limits from
// "everything" down to a page smaller than one reply, gives pages within
// the limits that join into the whole log's messages; while every reply
// fits in a page, no message is split.
func TestReadMessagesPages(t *testing.T) {
	log := conversation()
	whole := FoldMessages(log)
	tests := []struct {
		name  string
		lim   PageLimits
		pages int // 0: more than one, any number
		split bool
	}{
		{"one page", DefaultPageLimits(), 1, false},
		{"a page per reply", PageLimits{Entries: 20, Bytes: 1 << 20}, 0, false},
		{"by bytes", PageLimits{Entries: 1000, Bytes: 1200}, 0, false},
		{"pages shorter than a reply", PageLimits{Entries: 5, Bytes: 1 << 20}, 0, true},
		{"an entry a page", PageLimits{Entries: 1, Bytes: 1 << 20}, 0, true},
		{"a byte a page", PageLimits{Entries: 1000, Bytes: 1}, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pages := readAll(t, log, tc.lim)
			if (tc.pages != 0 && len(pages) != tc.pages) || (tc.pages == 0 && len(pages) < 2) {
				t.Fatalf("%d pages, want %d", len(pages), tc.pages)
			}
			joined := joinPages(pages)
			if !tc.split {
				if got, want := messagesJSON(t, joined), messagesJSON(t, whole); got != want {
					t.Fatalf("joined pages\n%s\nwant\n%s", got, want)
				}
				return
			}
			if len(joined) != len(whole) {
				t.Fatalf("%d messages joined, want %d", len(joined), len(whole))
			}
			for i, m := range joined {
				if m.ID != whole[i].ID || partsText(m, "text") != partsText(whole[i], "text") ||
					partsText(m, "reasoning") != partsText(whole[i], "reasoning") || m.Metadata["finish_reason"] != whole[i].Metadata["finish_reason"] {
					t.Errorf("message %d: %+v, want %+v", i, m, whole[i])
				}
			}
		})
	}
}

// partsText joins the texts of m's parts of kind.
func partsText(m wire.UIMessage, kind string) string {
	var b strings.Builder
	for _, p := range m.Parts {
		if p["type"] == kind {
			b.WriteString(p["text"].(string))
		}
	}
	return b.String()
}

// TestReadMessagesBounds: where a page ends, and what an empty one is.
func TestReadMessagesBounds(t *testing.T) {
	log := conversation()
	n := int64(len(log))
	tests := []struct {
		name          string
		log           []store.LogEntry
		before        int64
		first, last   int64
		messages, ids string
	}{
		{"the head", log, 0, 1, n, "in_a,msg_a,in_b,msg_b,in_c,msg_c", ""},
		{"before past the head", log, n + 10, 1, n, "in_a,msg_a,in_b,msg_b,in_c,msg_c", ""},
		{"before the first entry", log, 1, 0, 0, "", ""},
		{"an empty log", nil, 0, 0, 0, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ReadMessages(context.Background(), &sliceLog{entries: tc.log}, "s", tc.before, DefaultPageLimits())
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range p.Messages {
				ids = append(ids, m.ID)
			}
			if p.Messages == nil || p.FirstSeq != tc.first || p.LastSeq != tc.last || strings.Join(ids, ",") != tc.messages {
				t.Fatalf("page %d to %d with %v (nil: %v), want %d to %d with %s", p.FirstSeq, p.LastSeq, ids, p.Messages == nil,
					tc.first, tc.last, tc.messages)
			}
		})
	}
}

// TestReadMessagesHoldsAnOversizedEntry: an entry larger than the byte
// limit is a page of its own, never none.
func TestReadMessagesHoldsAnOversizedEntry(t *testing.T) {
	log := replyLog(3)
	p, err := ReadMessages(context.Background(), &sliceLog{entries: log}, "s", 0, PageLimits{Entries: 100, Bytes: 8})
	if err != nil {
		t.Fatal(err)
	}
	if n := int64(len(log)); p.FirstSeq != n || p.LastSeq != n || len(p.Messages) != 1 || p.Messages[0].Metadata["finish_reason"] != "stop" {
		t.Fatalf("page %+v", p)
	}
}

// TestFoldMessagesDeltaWithoutStart: a page that begins inside a text
// part still shows the text it holds.
func TestFoldMessagesDeltaWithoutStart(t *testing.T) {
	log := replyLog(2)[4:] // from the first delta
	msgs := FoldMessages(log)
	if len(msgs) != 1 || len(msgs[0].Parts) != 1 || msgs[0].Parts[0]["text"] != strings.Repeat("x", 64) || msgs[0].Parts[0]["state"] != "done" {
		t.Fatalf("messages %+v", msgs)
	}
}
