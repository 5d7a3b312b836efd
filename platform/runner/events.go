package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/astrabox/astrabox/internal/metrics"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store"
)

// chunk returns a UI frame entry of the current turn.
func (r *runner) chunk(c wire.Chunk) store.LogEntry { return r.frameEntry(c.JSON()) }

// opening returns a reply's opening frames: its acceptance and the start
// of its message.
func (r *runner) opening(in *store.Input) []store.LogEntry {
	return []store.LogEntry{
		r.chunk(wire.Data(wire.DataTurnAccepted, map[string]any{"turnId": in.TurnID, "inputId": in.ID})),
		r.chunk(wire.Start(r.turn.messageID, map[string]any{"turn_id": in.TurnID, "input_id": in.ID})),
	}
}

// failure returns a failed reply's closing frames: its failure and the
// end of its message.
func (r *runner) failure(code, msg string) []store.LogEntry {
	return []store.LogEntry{
		r.chunk(wire.Data(wire.DataTurnFailure, map[string]any{"code": code, "message": msg})),
		r.chunk(wire.Finish("error")),
	}
}

func (r *runner) frameEntry(raw json.RawMessage) store.LogEntry {
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(raw, &head)
	e := store.LogEntry{Type: head.Type, Payload: raw}
	if r.turn != nil {
		e.TurnID, e.InputID, e.MessageID = r.turn.id, r.turn.inputID, r.turn.messageID
	}
	return e
}

func (r *runner) control(typ string, fields map[string]any) store.LogEntry {
	b, _ := json.Marshal(fields)
	e := store.LogEntry{Type: typ, Payload: b}
	if r.turn != nil {
		e.TurnID, e.InputID = r.turn.id, r.turn.inputID
	}
	return e
}

// after is work to do once a batch's entries are committed.
type after func(context.Context) error

// handle records one batch of program events: the log entries first (one
// fenced append, carrying the output offset), then the input and session
// records they imply.
func (r *runner) handle(ctx context.Context, b batch) error {
	var entries []store.LogEntry
	var then []after
	var pending int64 // payload bytes of entries not yet appended
	now := time.Now()
	for _, ev := range b.events {
		var es []store.LogEntry
		var fn after
		if size, ok := r.chargeable(ev); ok {
			if o := r.charge(size, pending, now); o != nil {
				es, fn = r.endOverLimit(o)
			}
		}
		if es == nil {
			es, fn = r.classify(ctx, ev)
		}
		pending += entryBytes(es)
		entries = append(entries, es...)
		if fn != nil {
			then = append(then, fn)
		}
	}
	// Lines that made no entry need no durable position: read again
	// after a re-attach, they make none again.
	if b.source > 0 && len(entries) > 0 {
		entries[len(entries)-1].Source = b.source
	}
	if len(entries) > 0 {
		if _, err := r.append(ctx, entries...); err != nil {
			return err
		}
	}
	for _, fn := range then {
		if err := fn(ctx); err != nil {
			return err
		}
	}
	return nil
}

// classify turns one program event into log entries and follow-up work.
func (r *runner) classify(ctx context.Context, ev engine.Event) ([]store.LogEntry, after) {
	switch ev.Kind {
	case engine.InputReceived:
		in, err := r.m.st.GetInput(ctx, ev.InputID)
		if err != nil || in.SessionID != r.id || in.State != store.InputAccepted {
			return nil, nil // a redelivery, or not ours
		}
		return []store.LogEntry{{Type: "input.delivered", TurnID: in.TurnID, InputID: in.ID, Payload: json.RawMessage("{}")}},
			func(ctx context.Context) error {
				_, err := r.m.st.SetInputState(ctx, in.ID, store.InputDelivered, "", store.InputAccepted)
				if errors.Is(err, store.ErrConflict) {
					return nil
				}
				return err
			}
	case engine.InputConsumed:
		in, err := r.consumedInput(ctx, ev.InputID)
		if err != nil || in == nil || in.SessionID != r.id {
			if err != nil {
				r.log.Warn("read the consumed input", "input_id", ev.InputID, "err", err)
			}
			return nil, nil
		}
		if in.State != store.InputAccepted && in.State != store.InputDelivered {
			r.log.Warn("program consumed an input a second time; ignored", "input_id", in.ID, "state", in.State)
			return nil, nil
		}
		r.turn = &turn{id: in.TurnID, inputID: in.ID, messageID: "msg_" + in.ID, started: time.Now()}
		r.abandoned = "" // the program moved on
		es := append([]store.LogEntry{
			r.control("input.consumed", map[string]any{"input_id": in.ID}),
			r.control("turn.started", map[string]any{"input_id": in.ID}),
		}, r.opening(in)...)
		es = append(es, r.chunk(wire.Data(wire.DataInputConsumed, map[string]any{"inputId": in.ID})))
		turnID := in.TurnID
		consumed := func(ctx context.Context) error {
			if _, err := r.m.st.SetInputState(ctx, in.ID, store.InputConsumed, "", store.InputAccepted, store.InputDelivered); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
			return r.setState(ctx, platform.StateBusy, "input consumed", func(s *store.Session) { s.CurrentTurnID = turnID })
		}
		if !r.full() {
			return es, consumed
		}
		// Handed over before the log was full: the reply ends at once.
		closing, fail := r.endOverLimit(sessionFull(r.limits.SessionBytes))
		return append(es, closing...), func(ctx context.Context) error {
			if err := consumed(ctx); err != nil {
				return err
			}
			return fail(ctx)
		}
	case engine.Frame:
		if r.turn == nil {
			if r.log.Enabled(ctx, slog.LevelDebug) {
				r.log.Debug("program frame outside a reply; dropped", "chunk", truncate(string(ev.Chunk), 200))
			}
			return nil, nil
		}
		if err := r.turn.order.Accept(ev.Chunk); err != nil {
			return r.outOfOrder("frame", err), nil
		}
		return []store.LogEntry{r.frameEntry(ev.Chunk)}, nil
	case engine.InteractionRequested:
		if r.turn == nil {
			return nil, nil
		}
		ia, _ := json.Marshal(ev.Interaction)
		// The record first, unlike the rest: a client that reads the
		// interaction's frame must find it open when it answers, on a
		// Session that shows the reply it belongs to.
		var from string
		turnID := r.turn.id
		if _, err := r.updateSession(ctx, func(s *store.Session) {
			from = s.State
			s.PendingInteraction, s.Answer, s.CurrentTurnID = ia, nil, turnID
			if s.State != platform.StateDeleted && s.State != platform.StateInterrupting {
				s.State = platform.StateBusy
			}
		}); err != nil {
			r.log.Warn("record pending interaction", "err", err)
		}
		es := []store.LogEntry{
			r.chunk(wire.NewChunk(wire.DataInteraction, map[string]any{"id": ev.Interaction.ID, "data": json.RawMessage(ia)})),
			r.control("interaction.opened", map[string]any{"interaction": json.RawMessage(ia)}),
		}
		if from != platform.StateBusy && from != platform.StateInterrupting && from != platform.StateDeleted && from != "" {
			es = append(es, store.LogEntry{Type: "state.changed",
				Payload: mustJSON(map[string]string{"from": from, "to": platform.StateBusy, "reason": "input consumed"})})
		}
		return es, nil
	case engine.ReplyEnded:
		if a := r.abandoned; a != "" && (ev.End.InputID == a || (ev.End.InputID == "" && r.turn == nil)) {
			// The program's end of a reply the runner ended: its native
			// state is whole again.
			r.abandoned = ""
			return nil, r.mirrorNative
		}
		if r.turn != nil && ev.End.Outcome == engine.OutcomeCompleted {
			if running := r.turn.order.Running(); len(running) > 0 {
				return r.outOfOrder("reply end", fmt.Errorf("the reply completed while tool calls %v still run", running)), nil
			}
		}
		return r.replyEnded(ev.End)
	case engine.NativeKey:
		return nil, func(ctx context.Context) error { return r.nativeKey(ctx, ev) }
	case engine.StateGrew:
		return nil, r.stateGrew(time.Now())
	case engine.StateChanged:
		if ev.State == engine.StateIdle && r.turn == nil {
			return nil, func(ctx context.Context) error {
				s, err := r.m.st.GetSession(ctx, r.id)
				if err != nil || s.State != platform.StateCreating {
					return err
				}
				return r.setState(ctx, platform.StateReady, "runtime ready", nil)
			}
		}
		return nil, nil
	}
	r.log.Debug("program diagnostic", "text", truncate(ev.Text, 500))
	return nil, nil
}

// outOfOrder refuses a program event that breaks the reply's protocol
// order (engine.ReplyOrder): nothing of it is recorded but, for the
// reply's first such event, a program.out_of_order control entry for
// operators (later ones only in the server's log), so a flood of them
// costs no more than the limits already bound.
func (r *runner) outOfOrder(what string, err error) []store.LogEntry {
	r.turn.refused++
	if r.turn.refused > 1 {
		r.log.Debug("program event out of order; refused", "event", what, "err", err)
		return nil
	}
	r.log.Warn("program event out of order; refused", "event", what, "err", err)
	return []store.LogEntry{r.control("program.out_of_order", map[string]any{"event": what, "reason": err.Error()})}
}

// consumedInput returns the input a program consumed: the one named, or,
// for an event naming none, the oldest input the program was handed.
func (r *runner) consumedInput(ctx context.Context, id string) (*store.Input, error) {
	if id != "" {
		return r.m.st.GetInput(ctx, id)
	}
	for _, state := range []string{store.InputDelivered, store.InputAccepted} {
		ins, err := r.m.st.ListInputs(ctx, r.id, state)
		if err != nil {
			return nil, err
		}
		for _, in := range ins {
			if r.rt == nil || r.rt.sent[in.ID] {
				return in, nil
			}
		}
	}
	return nil, nil
}

// replyOutcome counts a reply ended with outcome (astrabox_replies_total);
// an outcome the program made up counts as "other".
func replyOutcome(outcome string) {
	switch outcome {
	case engine.OutcomeCompleted, engine.OutcomeInterrupted, engine.OutcomeFailed:
	case "":
		outcome = engine.OutcomeCompleted
	default:
		outcome = "other"
	}
	metrics.Replies.Inc(outcome)
}

// finishReasons maps program finish reasons onto the AI SDK's.
var finishReasons = map[string]string{"stop": "stop", "length": "length", "content_filter": "content-filter",
	"content-filter": "content-filter", "tool_calls": "tool-calls", "tool-calls": "tool-calls", "error": "error"}

// replyEnded closes the reply in progress.
func (r *runner) replyEnded(end *engine.ReplyEnd) ([]store.LogEntry, after) {
	if r.turn == nil || (end.InputID != "" && end.InputID != r.turn.inputID) {
		r.log.Warn("program ended a reply that is not in progress; ignored", "input_id", end.InputID)
		return nil, nil
	}
	var es []store.LogEntry
	state, code := store.InputAnswered, ""
	switch end.Outcome {
	case engine.OutcomeFailed:
		state, code = store.InputFailed, end.ErrorCode
		if code == "" {
			code = "PROGRAM_ERROR"
		}
		es = append(es, r.failure(code, end.ErrorMessage)...)
	default:
		reason := finishReasons[end.FinishReason]
		if reason == "" {
			reason = "other"
		}
		if end.Outcome == engine.OutcomeInterrupted {
			reason = "other"
			es = append(es, r.chunk(wire.Data(wire.DataTurnInterrupted, map[string]any{"turnId": r.turn.id})))
		}
		es = append(es, r.chunk(wire.Data(wire.DataResult, map[string]any{"usage": end.Usage, "outcome": end.Outcome})),
			r.chunk(wire.Finish(reason)))
	}
	es = append(es, r.control("turn.ended", map[string]any{"input_id": r.turn.inputID, "outcome": end.Outcome, "usage": end.Usage, "error_code": code}))
	replyOutcome(end.Outcome)
	inputID := r.turn.inputID
	r.turn = nil
	return es, func(ctx context.Context) error {
		if _, err := r.m.st.SetInputState(ctx, inputID, state, code, store.InputConsumed); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		if err := r.setState(ctx, platform.StateReady, "reply ended", replyClosed); err != nil {
			return err
		}
		return r.mirrorNative(ctx)
	}
}

// nativeKey records the program's conversation id; a program that was
// handed native state must report the conversation it was given.
func (r *runner) nativeKey(ctx context.Context, ev engine.Event) error {
	s, err := r.m.st.GetSession(ctx, r.id)
	if err != nil {
		return err
	}
	if s.NativeKey != "" && s.NativeKey != ev.Key {
		if r.mismatchNoted {
			return nil
		}
		r.mismatchNoted = true
		r.log.Warn("program did not resume the session's conversation", "want", s.NativeKey, "got", ev.Key)
		_, err := r.append(ctx, r.control("native_state.mismatch", map[string]any{"want": s.NativeKey, "got": ev.Key}))
		return err
	}
	// Inputs the program's own state records as consumed were taken before
	// a crash that the log did not see: never send them again.
	for _, id := range ev.Consumed {
		in, err := r.m.st.GetInput(ctx, id)
		if err != nil || in.SessionID != r.id {
			continue
		}
		if in.State == store.InputAccepted || in.State == store.InputDelivered || in.State == store.InputConsumed {
			if err := r.failInput(ctx, in, "SANDBOX_GONE", "the runtime was lost after the program took this input"); err != nil {
				return err
			}
		}
	}
	if s.NativeKey == "" && ev.Key != "" {
		_, err := r.updateSession(ctx, func(s *store.Session) { s.NativeKey = ev.Key })
		return err
	}
	return nil
}

// failInput ends an input as failed, closing its reply in the log if it
// was open.
func (r *runner) failInput(ctx context.Context, in *store.Input, code, msg string) error {
	var es []store.LogEntry
	if r.turn != nil && r.turn.inputID == in.ID {
		es = append(es, r.failure(code, msg)...)
		es = append(es, r.control("turn.ended", map[string]any{"input_id": in.ID, "outcome": engine.OutcomeFailed, "error_code": code}))
		replyOutcome(engine.OutcomeFailed)
		r.turn = nil
	} else {
		es = append(es, store.LogEntry{Type: "input.failed", TurnID: in.TurnID, InputID: in.ID,
			Payload: mustJSON(map[string]any{"input_id": in.ID, "error_code": code, "message": msg})})
	}
	if _, err := r.append(ctx, es...); err != nil {
		return err
	}
	if _, err := r.m.st.SetInputState(ctx, in.ID, store.InputFailed, code); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("fail input: %w", err)
	}
	return nil
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}
