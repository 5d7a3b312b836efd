package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/time/rate"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Session limits. A program's output costs the server a log entry per
// frame; a program (or the model behind it, or any process of its box that
// reaches its output) that prints without end would grow the store without
// bound and hold the store's writer from every other Session. So each
// Session has limits (lifecycle.SessionLimits: the profile's, over the
// server's, over DefaultLimits), checked before a frame is recorded:
//
//   - a reply's frames and their payload bytes (reply_frames, reply_bytes);
//   - the payload bytes of the Session's whole log (session_bytes): every
//     entry counts, control events included;
//   - the rate of the program's frames (frames_per_second): a token bucket
//     per Session holding burstSeconds of it, so a model that streams fast
//     passes and a flood is cut within a burst.
//
// Only what the program reports is charged (its frames and interactions);
// what the runner writes itself (a reply's opening and closing frames,
// control events) is never refused, so a reply always ends well-formed.
// Past a limit the reply ends at once as a failed reply does: a
// data-turn-failure {code, message} frame naming the limit, finish
// {finishReason: "error"} and turn.ended {outcome: failed, error_code}; the
// input fails with the code and the Session is READY again. The program is
// told to stop (an interrupt); what it still prints for that reply is
// dropped, and its own end of the reply is taken as the cue to mirror its
// native state. Past session_bytes, later inputs are not handed to the
// program: each fails at once with SESSION_BYTES_EXCEEDED.

// The failure codes of a reply ended by a limit (data-turn-failure's code,
// the input's error code), and of a native state refused.
const (
	CodeReplyBytesExceeded   sandbox.Code = "REPLY_BYTES_EXCEEDED"
	CodeReplyFramesExceeded  sandbox.Code = "REPLY_FRAMES_EXCEEDED"
	CodeSessionBytesExceeded sandbox.Code = "SESSION_BYTES_EXCEEDED"
	CodeFrameRateExceeded    sandbox.Code = "FRAME_RATE_EXCEEDED"
	CodeNativeStateTooLarge  sandbox.Code = "NATIVE_STATE_TOO_LARGE"
)

// DefaultLimits are a Session's limits where neither its profile nor the
// server's configuration sets them: room for long agentic replies and for
// fast models (a few thousand tokens a second), far below what a flood
// writes (tens of MB/s).
var DefaultLimits = lifecycle.SessionLimits{
	NativeStateBytes: 64 << 20,
	ReplyBytes:       32 << 20,
	ReplyFrames:      200_000,
	SessionBytes:     512 << 20,
	FramesPerSecond:  2_000,
}

// burstSeconds is how many seconds of frames_per_second a Session's token
// bucket holds.
const burstSeconds = 10

// applyLimits sets the Session's limits from its profile, for the runtime
// being built or re-attached. The rate bucket starts full.
func (r *runner) applyLimits(prof lifecycle.Profile) {
	l := r.m.cfg.Limits
	if prof.SessionLimits != nil {
		l = prof.SessionLimits.Or(l)
	}
	r.limits = l
	r.rate = newBucket(l.FramesPerSecond)
}

// newBucket returns the token bucket of a frames_per_second limit.
func newBucket(fps int64) *rate.Limiter {
	return rate.NewLimiter(rate.Limit(fps), int(fps*burstSeconds))
}

// overrun is a limit a program's output passed.
type overrun struct {
	code sandbox.Code
	msg  string
}

// charge counts one program event of the reply in progress (a frame or an
// interaction, of size payload bytes) against the Session's limits, and
// returns the limit it passes, if any (then nothing is counted). pending is
// the payload bytes of entries classified but not yet appended.
func (r *runner) charge(payload, pending int64, now time.Time) *overrun {
	l, t := r.limits, r.turn
	switch {
	case l.ReplyFrames > 0 && t.frames+1 > l.ReplyFrames:
		return &overrun{CodeReplyFramesExceeded, fmt.Sprintf("the reply passed its limit of %d frames (session_limits.reply_frames)", l.ReplyFrames)}
	case l.ReplyBytes > 0 && t.bytes+payload > l.ReplyBytes:
		return &overrun{CodeReplyBytesExceeded, fmt.Sprintf("the reply passed its limit of %d bytes (session_limits.reply_bytes)", l.ReplyBytes)}
	case l.SessionBytes > 0 && r.logBytes+pending+payload > l.SessionBytes:
		return sessionFull(l.SessionBytes)
	case r.rate != nil && !r.rate.AllowN(now, 1):
		return &overrun{CodeFrameRateExceeded, fmt.Sprintf("the program wrote frames faster than %d a second (session_limits.frames_per_second)", l.FramesPerSecond)}
	}
	t.frames++
	t.bytes += payload
	return nil
}

func sessionFull(limit int64) *overrun {
	return &overrun{CodeSessionBytesExceeded, fmt.Sprintf("the session's log reached its limit of %d bytes (session_limits.session_bytes); start a new session", limit)}
}

// full reports whether the Session's log is at its byte limit: inputs are
// no longer handed to the program.
func (r *runner) full() bool {
	return r.limits.SessionBytes > 0 && r.logBytes >= r.limits.SessionBytes
}

// chargeable reports whether ev is program output charged to the reply in
// progress, and its payload size.
func (r *runner) chargeable(ev engine.Event) (int64, bool) {
	if r.turn == nil {
		return 0, false
	}
	switch ev.Kind {
	case engine.Frame:
		return int64(len(ev.Chunk)), true
	case engine.InteractionRequested:
		b, _ := json.Marshal(ev.Interaction)
		return 2 * int64(len(b)), true // its frame and its control event
	}
	return 0, false
}

// endOverLimit ends the reply in progress for o (see the comment at the
// top of this file): the closing entries, then, once they are committed,
// the input's failure, the Session's state and the program's interrupt.
func (r *runner) endOverLimit(o *overrun) ([]store.LogEntry, after) {
	t := r.turn
	r.log.Warn("reply ended: the program's output passed a session limit", "input_id", t.inputID, "code", o.code,
		"frames", t.frames, "bytes", t.bytes, "log_bytes", r.logBytes)
	code := string(o.code)
	es := append(r.failure(code, o.msg),
		r.control("turn.ended", map[string]any{"input_id": t.inputID, "outcome": engine.OutcomeFailed, "error_code": code, "message": o.msg}))
	replyOutcome(engine.OutcomeFailed)
	r.turn, r.abandoned = nil, t.inputID
	return es, func(ctx context.Context) error {
		if _, err := r.m.st.SetInputState(ctx, t.inputID, store.InputFailed, code, store.InputConsumed); err != nil && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("fail input: %w", err)
		}
		if err := r.setState(ctx, platform.StateReady, "reply ended: "+code, replyClosed); err != nil {
			return err
		}
		if r.abandoned == t.inputID { // not ended by the program meanwhile
			r.stopProgram(ctx)
		}
		return nil
	}
}

// stopProgram asks the program to stop the reply the runner ended; a
// program that cannot be told is left to end it on its own.
func (r *runner) stopProgram(ctx context.Context) {
	if r.rt == nil {
		return
	}
	b, err := r.rt.adapter.EncodeInterrupt()
	if err == nil {
		err = r.writeStdin(ctx, b)
	}
	if err != nil {
		r.log.Info("interrupt the program after its reply was ended", "err", err)
	}
}

// entryBytes is what entries count against session_bytes.
func entryBytes(entries []store.LogEntry) int64 {
	var n int64
	for _, e := range entries {
		n += int64(len(e.Payload))
	}
	return n
}

// startLimits readies the Session's limits for a runtime of profile prof
// being built or re-attached, and what is noted once per runtime.
func (r *runner) startLimits(prof lifecycle.Profile) {
	r.applyLimits(prof)
	r.nativeRefused, r.mismatchNoted = false, false
}
