package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// recoverFromLog rebuilds the turn state from the log, which is written
// before the input and session records: an open turn.started is the reply
// in progress, and input records that lag behind the log are brought up to
// it. It also counts the log's bytes (session_bytes) and the open reply's
// frames. The log is read a page at a time: a long one is never held whole.
func (r *runner) recoverFromLog(ctx context.Context) error {
	logState := map[string]string{}
	var open *turn
	r.logBytes = 0
	err := r.readLog(ctx, func(e store.LogEntry) {
		r.logBytes += int64(len(e.Payload))
		if open != nil && e.InputID == open.inputID && !strings.Contains(e.Type, ".") {
			open.frames++ // charged as the reply's, with its own opening frames
			open.bytes += int64(len(e.Payload))
			_ = open.order.Accept(e.Payload) // recorded, so in order then
		}
		switch e.Type {
		case "input.delivered":
			if logState[e.InputID] == "" || logState[e.InputID] == store.InputAccepted {
				logState[e.InputID] = store.InputDelivered
			}
		case "input.accepted":
			logState[e.InputID] = store.InputAccepted
		case "turn.started":
			logState[e.InputID] = store.InputConsumed
			open = &turn{id: e.TurnID, inputID: e.InputID, messageID: "msg_" + e.InputID}
		case "turn.ended":
			var p struct {
				Outcome string `json:"outcome"`
			}
			_ = json.Unmarshal(e.Payload, &p)
			logState[e.InputID] = store.InputAnswered
			if p.Outcome == engine.OutcomeFailed {
				logState[e.InputID] = store.InputFailed
			}
			if open != nil && open.inputID == e.InputID {
				open = nil
			}
		case "input.failed":
			logState[e.InputID] = store.InputFailed
		}
	})
	if err != nil {
		return err
	}
	r.turn = open
	ins, err := r.m.st.ListInputs(ctx, r.id)
	if err != nil {
		return fmt.Errorf("list inputs: %w", err)
	}
	rank := map[string]int{store.InputAccepted: 0, store.InputDelivered: 1, store.InputConsumed: 2, store.InputAnswered: 3, store.InputFailed: 3}
	for _, in := range ins {
		want, ok := logState[in.ID]
		if !ok || rank[want] <= rank[in.State] {
			continue
		}
		if _, err := r.m.st.SetInputState(ctx, in.ID, want, "", in.State); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("catch input up with the log: %w", err)
		}
	}
	return nil
}

// logPage is how many log entries recoverFromLog reads at a time.
const logPage = 1024

// readLog calls fn for every entry of the Session's log, in order.
func (r *runner) readLog(ctx context.Context, fn func(store.LogEntry)) error {
	var after int64
	for {
		page, err := r.m.st.ReadStream(ctx, r.id, after, logPage)
		if err != nil {
			return fmt.Errorf("read log: %w", err)
		}
		for _, e := range page {
			fn(e)
			after = e.Seq
		}
		if len(page) < logPage {
			return nil
		}
	}
}

// lost handles a runtime that is gone (sandbox deleted, expired, program
// exited): the reply in progress fails with SANDBOX_GONE and is never
// re-sent; the Session shows RECOVERY_REQUIRED until the next input
// rebuilds it. Accepted and delivered inputs stay for the replacement.
func (r *runner) lost(ctx context.Context, reason string) error {
	if err := r.confirmLease(ctx); err != nil {
		return err
	}
	var boxID string
	if r.rt != nil {
		boxID = r.rt.box.ID
		r.closeRuntime()
	} else if s, err := r.m.st.GetSession(ctx, r.id); err == nil {
		boxID = s.SandboxID
	}
	r.log.Info("session runtime lost", "reason", reason, "sandbox_id", boxID)
	consumed, err := r.m.st.ListInputs(ctx, r.id, store.InputConsumed)
	if err != nil {
		return fmt.Errorf("list inputs: %w", err)
	}
	for _, in := range consumed {
		if err := r.failInput(ctx, in, "SANDBOX_GONE", "the sandbox running this reply was lost"); err != nil {
			return err
		}
	}
	r.turn = nil
	if boxID != "" {
		del, cancel := context.WithTimeout(ctx, time.Minute)
		err := r.m.cfg.Sandboxes.Delete(del, boxID, "session runtime lost")
		cancel()
		if err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
			r.log.Warn("delete lost runtime's sandbox", "sandbox_id", boxID, "err", err)
		}
	}
	return r.setState(ctx, platform.StateRecoveryRequired, reason, func(s *store.Session) {
		s.SandboxID, s.Runtime = "", nil
		replyClosed(s)
	})
}

// confirmLease renews the Session lease before the runner deletes a
// sandbox or rewrites the Session's runtime: a holder that was frozen or
// cut off while another took the Session over gets store.ErrFenced and
// stops, instead of deleting the new holder's box. (The session record
// itself is not fenced; this check keeps a stale holder off the record's
// runtime fields.)
func (r *runner) confirmLease(ctx context.Context) error {
	if _, err := r.m.st.RenewLease(ctx, r.id, r.m.cfg.Holder, r.epoch, r.m.cfg.LeaseTTL); err != nil {
		return fmt.Errorf("confirm the session lease: %w", err)
	}
	return nil
}

// buildFailed answers the pending inputs with a failed reply each (the
// user sees why) and leaves the Session RECOVERY_REQUIRED; the next input
// tries again.
func (r *runner) buildFailed(ctx context.Context, pending []*store.Input, err error) (bool, error) {
	code, msg := string(sandbox.CodeOf(err)), sandbox.MessageOf(err)
	if sandbox.CodeOf(err) == sandbox.CodeInternal {
		msg = "the runtime could not be started (see the server log)"
	}
	r.log.Warn("session runtime could not be built", "err", err)
	for _, in := range pending {
		if err := r.failUnstarted(ctx, in, code, msg); err != nil {
			return false, err
		}
	}
	return false, r.setState(ctx, platform.StateRecoveryRequired, "runtime could not be started: "+msg, func(s *store.Session) {
		s.SandboxID, s.Runtime, s.CurrentTurnID = "", nil, ""
	})
}

// failUnstarted answers an input the program never took with a failed
// reply: its opening frames, then the failure (the user sees why).
func (r *runner) failUnstarted(ctx context.Context, in *store.Input, code, msg string) error {
	r.turn = &turn{id: in.TurnID, inputID: in.ID, messageID: "msg_" + in.ID}
	es := append([]store.LogEntry{r.control("turn.started", map[string]any{"input_id": in.ID})}, r.opening(in)...)
	if _, err := r.append(ctx, es...); err != nil {
		return err
	}
	return r.failInput(ctx, in, code, msg)
}

// releaseIdle saves the native state, deletes the sandbox and leaves the
// Session TERMINATED; the next input re-creates the runtime.
func (r *runner) releaseIdle(ctx context.Context) error {
	if err := r.confirmLease(ctx); err != nil {
		return err
	}
	if err := r.mirrorNative(ctx); err != nil {
		return err
	}
	boxID := r.rt.box.ID
	r.closeRuntime()
	if err := r.m.cfg.Sandboxes.Delete(ctx, boxID, "session idle"); err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		r.log.Warn("delete idle session's sandbox", "sandbox_id", boxID, "err", err)
	}
	r.log.Info("idle session runtime released", "sandbox_id", boxID)
	return r.setState(ctx, platform.StateTerminated, "idle", func(s *store.Session) { s.SandboxID, s.Runtime = "", nil })
}
