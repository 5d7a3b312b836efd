package lifecycle

import (
	"context"
	"fmt"

	"github.com/astrabox/astrabox/store"
)

// eventLog returns the log the Service records and follows state events
// on: each sandbox's events are the durable stream EventStream(id).
func (s *Service) eventLog() EventLog { return s.cfg.EventLog }

// emit records rec's current state as the next event of its stream, which
// wakes its followers. A failure is logged: the record is saved already.
func (s *Service) emit(ctx context.Context, rec *store.Sandbox) {
	entry, err := encodeEvent(store.Event{SandboxID: rec.ID, State: rec.State, Reason: rec.Reason, At: s.now().UTC()})
	if err == nil {
		_, err = s.eventLog().Append(context.WithoutCancel(ctx), EventStream(rec.ID), 0, entry)
	}
	if err != nil {
		s.log.Warn("record sandbox event", "sandbox_id", rec.ID, "state", rec.State, "err", err)
	}
}

// Events returns the recorded events of sandbox id with Seq > afterSeq, in
// order (none for an unknown sandbox). Seqs are the sandbox's own, gap-free
// from 1, and the events of a deleted sandbox are kept for
// Config.EventRetention (see ForgetEvents).
func (s *Service) Events(ctx context.Context, id string, afterSeq int64) ([]store.Event, error) {
	entries, err := s.cfg.Store.ReadStream(ctx, EventStream(id), afterSeq, 0)
	if err != nil {
		return nil, fmt.Errorf("read events of sandbox %s: %w", id, err)
	}
	out := make([]store.Event, 0, len(entries))
	for _, e := range entries {
		ev, ok, err := decodeEvent(id, e)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, ev)
		}
	}
	return out, nil
}

// FollowEvents calls fn for every event of sandbox id with Seq > afterSeq,
// in order: the recorded ones, then each new one as any replica records it.
// It returns nil when fn returns false, fn's error, or ctx.Err() when ctx
// ends; it never ends by itself (fn decides, e.g. at a terminal state).
func (s *Service) FollowEvents(ctx context.Context, id string, afterSeq int64, fn func(store.Event) (bool, error)) error {
	return s.eventLog().Follow(ctx, EventStream(id), afterSeq, func(e store.LogEntry) (bool, error) {
		ev, ok, err := decodeEvent(id, e)
		if err != nil || !ok {
			return err == nil, err
		}
		return fn(ev)
	})
}
