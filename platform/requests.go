package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// What the front asks of the holder of a Session's runtime travels one
// way, whichever replica holds it: recorded in the store first (an input
// as an Input, an interrupt as the Session's InterruptRequestedAt, an
// answer as its Answer), then a wake-up (wakeHolder). The holder carries
// it out and clears it; a holder that missed the wake-up finds it on its
// next look at the store, and a new holder after a restart finds it too.

// wakeHolder tells the holder of the Session's runtime that the store has
// work for it: a replica that holds it hears the notification, a runner of
// this replica is woken (or started, when none holds the Session).
func (s *Sessions) wakeHolder(sessionID string) {
	s.cfg.Log.Notifier.Notify(WakeStream(sessionID))
	s.rt.Wake(sessionID)
}

// Interrupt asks the holder of the Session's runtime to stop the reply in
// progress and reports whether one is in progress (the Session BUSY or
// INTERRUPTING, or its log showing a reply opened and not finished). The
// request is recorded on the Session; the holder writes the interrupt to
// the program and moves the Session to INTERRUPTING. A request that finds
// the reply ended is dropped: it never reaches a later one.
func (s *Sessions) Interrupt(ctx context.Context, sessionID string) (bool, error) {
	rec, err := s.actableSession(ctx, sessionID, "interrupting")
	if err != nil {
		return false, err
	}
	for {
		if ok, err := s.replyInProgress(ctx, rec); err != nil || !ok {
			return false, err
		}
		if rec.InterruptRequestedAt != nil {
			break // recorded (or asked already: the holder is told again)
		}
		at := s.stamp()
		rec.InterruptRequestedAt, rec.UpdatedAt = &at, time.Time{}
		if rec, err = s.updateRequest(ctx, rec, "record an interrupt"); err != nil {
			return false, err
		}
	}
	s.wakeHolder(sessionID)
	return true, nil
}

// replyInProgress reports whether rec's Session is replying: its state
// says so, or its log has a reply opened and not finished (the holder
// logs a reply's start before it moves the Session to BUSY).
func (s *Sessions) replyInProgress(ctx context.Context, rec *store.Session) (bool, error) {
	if rec.State == StateBusy || rec.State == StateInterrupting {
		return true, nil
	}
	if rec.State == StateDeleted {
		return false, nil
	}
	start, err := activeReply(ctx, s.st, rec.ID)
	if err != nil {
		return false, fmt.Errorf("find the reply in progress: %w", err)
	}
	return start.Found, nil
}

// Respond records the answer to the Session's pending interaction for the
// holder of its runtime to deliver, once: INTERACTION_CLOSED when a is not
// for the interaction open now or that interaction has another answer
// already (the same answer again succeeds while it waits for delivery: a
// retried request). Once recorded, the Session shows no pending
// interaction.
func (s *Sessions) Respond(ctx context.Context, sessionID string, a engine.Answer) error {
	rec, err := s.actableSession(ctx, sessionID, "answering an interaction of")
	if err != nil {
		return err
	}
	answer := EncodeAnswer(a)
	for string(rec.Answer) != string(answer) {
		if err := checkAnswer(rec, a); err != nil {
			return err
		}
		rec.Answer, rec.UpdatedAt = answer, time.Time{}
		if rec, err = s.updateRequest(ctx, rec, "record an answer"); err != nil {
			return err
		}
	}
	s.wakeHolder(sessionID)
	return nil
}

// updateRequest stores rec and returns it; on a concurrent update it
// returns the current record instead, for the caller to decide again
// (SESSION_NOT_FOUND when the Session is gone).
func (s *Sessions) updateRequest(ctx context.Context, rec *store.Session, what string) (*store.Session, error) {
	id := rec.ID
	err := s.st.UpdateSession(ctx, rec)
	if err == nil {
		return rec, nil
	}
	if errors.Is(err, store.ErrConflict) {
		rec, err = s.st.GetSession(ctx, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		return nil, sessionNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return rec, nil
}

// checkAnswer reports whether a answers rec's open interaction, which has
// no answer yet, in the form its kind needs.
func checkAnswer(rec *store.Session, a engine.Answer) error {
	var pending engine.Interaction
	if len(rec.PendingInteraction) == 0 || json.Unmarshal(rec.PendingInteraction, &pending) != nil || pending.ID != a.InteractionID {
		return sandbox.Errorf(CodeInteractionClosed, "interaction %q is not open in session %s", a.InteractionID, rec.ID)
	}
	if len(rec.Answer) > 0 {
		return sandbox.Errorf(CodeInteractionClosed, "interaction %q of session %s is answered already", a.InteractionID, rec.ID)
	}
	if pending.Kind == wire.InteractionApproval && a.Decision != string(wire.DecisionApprove) && a.Decision != string(wire.DecisionReject) {
		return invalid("answer.decision must be approve or reject")
	}
	if pending.Kind == wire.InteractionQuestion && len(a.Answers) == 0 {
		return invalid("answer.answers is required for a question")
	}
	return nil
}

// EncodeAnswer is how an answer is kept on its Session (store.Session's
// Answer): the interaction-respond body.
func EncodeAnswer(a engine.Answer) json.RawMessage {
	b, _ := json.Marshal(wire.RespondRequest{InteractionID: a.InteractionID,
		Answer: wire.Answer{Decision: wire.Decision(a.Decision), Comment: a.Comment, Answers: a.Answers}})
	return b
}

// DecodeAnswer reads an answer kept by EncodeAnswer.
func DecodeAnswer(b json.RawMessage) (engine.Answer, error) {
	var req wire.RespondRequest
	if err := json.Unmarshal(b, &req); err != nil {
		return engine.Answer{}, fmt.Errorf("decode a recorded answer: %w", err)
	}
	return engine.Answer{InteractionID: req.InteractionID, Decision: string(req.Answer.Decision),
		Comment: req.Answer.Comment, Answers: req.Answer.Answers}, nil
}
