package platform

import (
	"context"
	"math"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// ReplyStart is where an AI stream of a Session begins: the reply it
// serves and the seq to follow the log after.
type ReplyStart struct {
	// Reply is the reply served (Found), from its first frame; its End is
	// 0 unless the reply had finished when it was selected. Without one
	// (Found false) the stream serves the next reply to open after After.
	Reply Reply
	Found bool
	// After is the seq the stream follows the log after: Reply.Start-1
	// when Found, else the log's head or later.
	After int64
}

// replyIndex is the part of the store a reply selection reads: single
// entries found through the stream's (type, seq) index, never the log.
type replyIndex interface {
	StreamHead(ctx context.Context, stream string) (int64, error)
	LastOfType(ctx context.Context, stream, typ string, atOrBefore int64) (store.LogEntry, bool, error)
	NextOfType(ctx context.Context, stream, typ string, after int64) (store.LogEntry, bool, error)
}

// ResumeReply selects the reply a stream resumed after seq n serves
// (PLATFORM.md's after_seq rule, as ResumePoint states it): the reply n
// falls inside, finished or not, else the first reply that opens after
// n. Found is false when there is none; After is then max(n, head). It
// reads at most three entries and the head, however long the log
// (SESSION_NOT_FOUND unless the caller may see the Session). A
// reply's span is its opening frame (data-turn-accepted) to its finish
// frame; replies follow one another, so the reply n falls inside is the
// last one opened at or before n, unless it finished at or before n.
func (s *Sessions) ResumeReply(ctx context.Context, sessionID string, n int64) (ReplyStart, error) {
	if err := s.CheckSession(ctx, sessionID); err != nil {
		return ReplyStart{}, err
	}
	return resumeReply(ctx, s.st, sessionID, n)
}

// ActiveReply selects the reply a stream with follow=session and no
// after_seq serves: the reply in progress (the last opened, unfinished),
// else none, and the stream serves the next one to open after the head
// (SESSION_NOT_FOUND unless the caller may see the Session).
func (s *Sessions) ActiveReply(ctx context.Context, sessionID string) (ReplyStart, error) {
	if err := s.CheckSession(ctx, sessionID); err != nil {
		return ReplyStart{}, err
	}
	return activeReply(ctx, s.st, sessionID)
}

func resumeReply(ctx context.Context, ix replyIndex, stream string, n int64) (ReplyStart, error) {
	r, open, err := replyAt(ctx, ix, stream, n)
	if err != nil || open {
		return ReplyStart{Reply: r, Found: open, After: r.Start - 1}, err
	}
	next, ok, err := ix.NextOfType(ctx, stream, string(wire.DataTurnAccepted), n)
	if err != nil {
		return ReplyStart{}, err
	}
	if ok && next.TurnID != "" {
		return ReplyStart{Reply: replyOpenedBy(next), Found: true, After: next.Seq - 1}, nil
	}
	head, err := ix.StreamHead(ctx, stream)
	return ReplyStart{After: max(n, head)}, err
}

func activeReply(ctx context.Context, ix replyIndex, stream string) (ReplyStart, error) {
	r, open, err := replyAt(ctx, ix, stream, math.MaxInt64)
	if err != nil || open {
		return ReplyStart{Reply: r, Found: open, After: r.Start - 1}, err
	}
	head, err := ix.StreamHead(ctx, stream)
	return ReplyStart{After: head}, err
}

// replyAt returns the last reply opened at or before n, and whether it
// is open at n: unfinished, or finished after n.
func replyAt(ctx context.Context, ix replyIndex, stream string, n int64) (Reply, bool, error) {
	opening, ok, err := ix.LastOfType(ctx, stream, string(wire.DataTurnAccepted), n)
	if err != nil || !ok || opening.TurnID == "" {
		return Reply{}, false, err
	}
	r := replyOpenedBy(opening)
	fin, ok, err := ix.NextOfType(ctx, stream, string(wire.ChunkFinish), opening.Seq)
	if err != nil {
		return Reply{}, false, err
	}
	if ok && fin.TurnID == r.TurnID {
		r.End = fin.Seq
	}
	return r, r.End == 0 || n < r.End, nil
}

// replyOpenedBy is the reply whose opening frame is e.
func replyOpenedBy(e store.LogEntry) Reply {
	return Reply{TurnID: e.TurnID, InputID: e.InputID, MessageID: e.MessageID, Start: e.Seq}
}
