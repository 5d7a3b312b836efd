package platform

import (
	"context"
	"fmt"
	"testing"

	"github.com/astrabox/astrabox/store"
)

// indexedLog is a replyIndex over a slice that counts the entries its
// reads return.
type indexedLog struct {
	entries []store.LogEntry
	read    int
}

func (l *indexedLog) StreamHead(context.Context, string) (int64, error) {
	if len(l.entries) == 0 {
		return 0, nil
	}
	return l.entries[len(l.entries)-1].Seq, nil
}

func (l *indexedLog) LastOfType(_ context.Context, _, typ string, atOrBefore int64) (store.LogEntry, bool, error) {
	for i := len(l.entries) - 1; i >= 0; i-- {
		if e := l.entries[i]; e.Seq <= atOrBefore && e.Type == typ {
			l.read++
			return e, true, nil
		}
	}
	return store.LogEntry{}, false, nil
}

func (l *indexedLog) NextOfType(_ context.Context, _, typ string, after int64) (store.LogEntry, bool, error) {
	for _, e := range l.entries {
		if e.Seq > after && e.Type == typ {
			l.read++
			return e, true, nil
		}
	}
	return store.LogEntry{}, false, nil
}

// TestResumeReplyAgreesWithResumePoint: the indexed selection picks, for
// every after_seq, the reply ResumePoint picks from the whole log, and for
// follow=session the reply ActiveReply picks.
func TestResumeReplyAgreesWithResumePoint(t *testing.T) {
	logs := map[string][]store.LogEntry{
		"two replies, the last in progress": logOf("input.accepted", "a", "turn.started", "a", "data-turn-accepted", "a", "start", "a",
			"text-delta", "a", "finish", "a", "turn.ended", "a", "input.accepted", "b", "data-turn-accepted", "b", "start", "b", "text-delta", "b"),
		"one finished reply": logOf("data-turn-accepted", "a", "start", "a", "finish", "a", "turn.ended", "a"),
		"controls only":      logOf("input.accepted", "a", "input.failed", "a"),
		"empty":              nil,
		"three finished": logOf("data-turn-accepted", "a", "finish", "a", "data-turn-accepted", "b", "text-delta", "b", "finish", "b",
			"turn.ended", "b", "data-turn-accepted", "c", "finish", "c"),
	}
	for name, log := range logs {
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			ix := &indexedLog{entries: log}
			replies := Replies(log)
			head, _ := ix.StreamHead(ctx, "s")
			for n := int64(0); n <= head+2; n++ {
				got, err := resumeReply(ctx, ix, "s", n)
				if err != nil {
					t.Fatal(err)
				}
				want, found := ResumePoint(replies, n)
				wantAfter := max(n, head)
				if found {
					wantAfter = want.Start - 1
				}
				if got.Found != found || got.Reply.TurnID != want.TurnID || got.Reply.Start != want.Start || got.After != wantAfter {
					t.Errorf("after %d: %+v, want %+v found %v after %d", n, got, want, found, wantAfter)
				}
			}
			got, err := activeReply(ctx, ix, "s")
			if err != nil {
				t.Fatal(err)
			}
			want, found := ActiveReply(replies)
			wantAfter := head
			if found {
				wantAfter = want.Start - 1
			}
			if got.Found != found || got.Reply.TurnID != want.TurnID || got.After != wantAfter {
				t.Errorf("active: %+v, want %+v found %v after %d", got, want, found, wantAfter)
			}
		})
	}
}

// TestResumeReplyReadsFewEntries: selecting the reply to resume in a log
// of 10,000 entries reads a few of them, not the log.
func TestResumeReplyReadsFewEntries(t *testing.T) {
	var pairs []string
	for turn := 0; len(pairs)/2 < 10_000; turn++ {
		id := fmt.Sprint("t", turn)
		pairs = append(pairs, "turn.started", id, "data-turn-accepted", id, "start", id)
		for range 96 {
			pairs = append(pairs, "text-delta", id)
		}
		pairs = append(pairs, "finish", id)
	}
	ix := &indexedLog{entries: logOf(pairs...)[:10_000]}
	got, err := resumeReply(t.Context(), ix, "s", 9_990)
	if err != nil || !got.Found {
		t.Fatalf("%+v %v", got, err)
	}
	if ix.read > 3 {
		t.Errorf("selecting the reply read %d entries, want at most 3", ix.read)
	}
	t.Logf("entries read to select the reply: %d; the reply's frames sent from seq %d", ix.read, got.Reply.Start)
}
