package runner

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/store"
)

// carryOutRequests carries out what the Session's front recorded on s for
// the holder of its runtime (platform's requests.go): an interrupt of the
// reply in progress, the answer to the pending interaction. Each is
// cleared once done; one that no longer applies (the reply ended, another
// interaction is open) is dropped.
func (r *runner) carryOutRequests(ctx context.Context, s *store.Session) error {
	if s.InterruptRequestedAt != nil {
		if err := r.interrupt(ctx, *s.InterruptRequestedAt); err != nil {
			return err
		}
	}
	if len(s.Answer) > 0 {
		return r.deliverAnswer(ctx, s)
	}
	return nil
}

// requested reports whether the Session has a request waiting for its
// holder.
func (r *runner) requested(ctx context.Context) bool {
	s, err := r.m.st.GetSession(ctx, r.id)
	return err == nil && (s.InterruptRequestedAt != nil || len(s.Answer) > 0)
}

// replyClosed clears from s what belonged to the reply that ended: its
// turn, its interaction and that interaction's answer, and an interrupt
// asked of it (which must not reach a later reply).
func replyClosed(s *store.Session) {
	s.CurrentTurnID, s.PendingInteraction, s.Answer, s.InterruptRequestedAt = "", nil, nil, nil
}

// interrupt asks the program to stop the reply in progress, for the
// request made at requested, and clears that request: the Session is
// INTERRUPTING until the reply ends. Without a reply in progress the
// request is dropped.
func (r *runner) interrupt(ctx context.Context, requested time.Time) error {
	clear := func(s *store.Session) {
		if s.InterruptRequestedAt != nil && !s.InterruptRequestedAt.After(requested) {
			s.InterruptRequestedAt = nil
		}
	}
	if r.turn == nil || r.rt == nil {
		_, err := r.updateSession(ctx, clear)
		return err
	}
	b, err := r.rt.adapter.EncodeInterrupt()
	if err == nil {
		err = r.writeStdin(ctx, b)
	}
	if err != nil {
		// An unreachable program is the runtime's loss, seen on its own.
		r.log.Warn("write an interrupt to the program", "err", err)
	}
	if r.turn.interrupting {
		_, err := r.updateSession(ctx, clear)
		return err
	}
	r.turn.interrupting = true
	return r.setState(ctx, platform.StateInterrupting, "interrupt requested", clear)
}

// deliverAnswer writes the answer recorded on s to the program, logs it
// (interaction.answered) and closes the interaction. An answer the
// program's protocol cannot carry is logged as interaction.answer_refused
// and cleared, so that the interaction may be answered again; one that
// could not be written stays for the next step.
func (r *runner) deliverAnswer(ctx context.Context, s *store.Session) error {
	recorded := s.Answer
	drop := func(s *store.Session) {
		if bytes.Equal(s.Answer, recorded) {
			s.Answer = nil
		}
	}
	a, err := platform.DecodeAnswer(recorded)
	var pending engine.Interaction
	if err != nil || r.rt == nil || json.Unmarshal(s.PendingInteraction, &pending) != nil || pending.ID != a.InteractionID {
		_, err := r.updateSession(ctx, drop) // not for the interaction open now
		return err
	}
	b, err := r.rt.adapter.EncodeAnswer(a)
	if err != nil {
		if _, err := r.append(ctx, r.control("interaction.answer_refused", map[string]any{"interaction_id": a.InteractionID,
			"message": err.Error()})); err != nil {
			return err
		}
		_, err := r.updateSession(ctx, drop)
		return err
	}
	if err := r.writeStdin(ctx, b); err != nil {
		r.log.Warn("write an answer to the program; tried again at the next step", "err", err)
		return nil
	}
	if _, err := r.append(ctx, r.control("interaction.answered", map[string]any{"interaction_id": a.InteractionID,
		"decision": a.Decision, "comment": a.Comment, "answers": a.Answers})); err != nil {
		return err
	}
	_, err = r.updateSession(ctx, func(s *store.Session) {
		if bytes.Equal(s.Answer, recorded) {
			s.PendingInteraction, s.Answer = nil, nil
		}
	})
	return err
}
