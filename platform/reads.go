package platform

import (
	"context"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// ReadLog returns the entries of the Session's log with Seq > afterSeq, in
// order; SESSION_NOT_FOUND unless the caller may see the Session.
func (s *Sessions) ReadLog(ctx context.Context, sessionID string, afterSeq int64) ([]store.LogEntry, error) {
	if err := s.CheckSession(ctx, sessionID); err != nil {
		return nil, err
	}
	return s.st.ReadStream(ctx, sessionID, afterSeq, 0)
}

// Follow calls fn for every entry of the Session's log with Seq >
// afterSeq, in order, waiting for new ones as any replica appends them,
// until fn returns false (Follow returns nil) or an error (returned), or
// ctx ends (ctx.Err()); SESSION_NOT_FOUND unless the caller may see the
// Session when it starts. (Who may no longer see it is the streaming
// edge's to notice: it ends ctx.)
func (s *Sessions) Follow(ctx context.Context, sessionID string, afterSeq int64, fn func(store.LogEntry) (bool, error)) error {
	if err := s.CheckSession(ctx, sessionID); err != nil {
		return err
	}
	return s.cfg.Log.Follow(ctx, sessionID, afterSeq, fn)
}

// Messages folds one page of the Session's conversation (see
// ReadMessages), with the default page limits; SESSION_NOT_FOUND unless
// the caller may see the Session.
func (s *Sessions) Messages(ctx context.Context, sessionID string, before int64) (wire.Transcript, error) {
	if err := s.CheckSession(ctx, sessionID); err != nil {
		return wire.Transcript{}, err
	}
	return ReadMessages(ctx, s.st, sessionID, before, DefaultPageLimits())
}
