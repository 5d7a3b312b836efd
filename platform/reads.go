package platform

import (
	"context"

	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// ReadLog returns the entries of the Session's log with Seq > afterSeq, in
// order (none for an unknown Session).
func (s *Sessions) ReadLog(ctx context.Context, sessionID string, afterSeq int64) ([]store.LogEntry, error) {
	return s.st.ReadStream(ctx, sessionID, afterSeq, 0)
}

// Follow calls fn for every entry of the Session's log with Seq >
// afterSeq, in order, waiting for new ones as any replica appends them,
// until fn returns false (Follow returns nil) or an error (returned), or
// ctx ends (ctx.Err()).
func (s *Sessions) Follow(ctx context.Context, sessionID string, afterSeq int64, fn func(store.LogEntry) (bool, error)) error {
	return s.cfg.Log.Follow(ctx, sessionID, afterSeq, fn)
}

// Messages folds one page of the Session's conversation (see
// ReadMessages), with the default page limits.
func (s *Sessions) Messages(ctx context.Context, sessionID string, before int64) (wire.Transcript, error) {
	return ReadMessages(ctx, s.st, sessionID, before, DefaultPageLimits())
}
