package platform

import (
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// The whole-log reply selection that the indexed one (resume.go) replaced,
// kept as the reference the indexed one is tested against.

// Replies returns the replies in a log, in order.
func Replies(entries []store.LogEntry) []Reply {
	var out []Reply
	idx := map[string]int{}
	for _, e := range entries {
		if !IsFrame(e) || e.TurnID == "" {
			continue
		}
		i, ok := idx[e.TurnID]
		if !ok {
			out = append(out, Reply{TurnID: e.TurnID, InputID: e.InputID, MessageID: e.MessageID, Start: e.Seq})
			i = len(out) - 1
			idx[e.TurnID] = i
		}
		if out[i].MessageID == "" {
			out[i].MessageID = e.MessageID
		}
		if e.Type == string(wire.ChunkFinish) {
			out[i].End = e.Seq
		}
	}
	return out
}

// ResumePoint picks the reply a stream resumed after seq n starts with
// (PLATFORM.md's after_seq rule): the reply n falls inside (active or
// finished), else the first reply that starts after n. ok is false when
// there is none (n is at or past the end of the last reply).
func ResumePoint(replies []Reply, n int64) (Reply, bool) {
	for _, r := range replies {
		if r.Start <= n && (r.End == 0 || n < r.End) {
			return r, true
		}
		if r.Start > n {
			return r, true
		}
	}
	return Reply{}, false
}

// ActiveReply returns the reply in progress, if any.
func ActiveReply(replies []Reply) (Reply, bool) {
	for i := len(replies) - 1; i >= 0; i-- {
		if replies[i].End == 0 {
			return replies[i], true
		}
	}
	return Reply{}, false
}
