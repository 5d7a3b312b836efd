package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/store"
)

// runner holds one Session's runtime. Only its run goroutine touches the
// session record, the live runtime and the turn state.
type runner struct {
	m   *Manager
	id  string
	log *slog.Logger

	wake chan struct{}
	done chan struct{}

	ctx       context.Context
	cancel    context.CancelFunc
	stopOnce  sync.Once
	releaseRT atomic.Bool // set by shutdown(true): delete the sandbox too

	epoch int64
	rt    *runtime
	turn  *turn // the reply in progress, if any
	// abandoned is the input whose reply the runner ended (a limit) while
	// its program may still run it: its frames are dropped and its end is
	// the program's, not a reply's (see limits.go).
	abandoned string
	// limits are the Session's (see limits.go), set with its runtime; rate
	// is its frames_per_second bucket.
	limits lifecycle.SessionLimits
	rate   *rate.Limiter
	// logBytes is the payload bytes of the Session's log.
	logBytes int64
	// nativeSize is how many bytes of native state the store holds, as of
	// lastMirror, the last mirror begun; nativeRefused is set once the
	// runtime's native state passed its limit (nothing more is mirrored
	// from it); mirrorLater is armed while a hint to mirror waits for
	// mirrorInterval (see nativestate.go).
	nativeSize    int64
	lastMirror    time.Time
	nativeRefused bool
	mirrorLater   *time.Timer
	// mismatchNoted is set once a native_state.mismatch is recorded for
	// the runtime: a program that repeats its key costs no more entries.
	mismatchNoted bool
	lastActive    time.Time
}

// turn is the reply in progress.
type turn struct {
	id, inputID, messageID string
	interrupting           bool
	started                time.Time // zero for a reply recovered from the log
	// frames and bytes are what the program wrote of the reply so far.
	frames, bytes int64
	// order is the protocol order of the program's frames so far (a
	// reply recovered from the log gets its recorded frames); refused
	// counts the program's events it refused.
	order   engine.ReplyOrder
	refused int
}

func newRunner(m *Manager, id string) *runner {
	ctx, cancel := context.WithCancel(m.ctx)
	return &runner{m: m, id: id, log: m.log.With("session_id", id), wake: make(chan struct{}, 1),
		done: make(chan struct{}), ctx: ctx, cancel: cancel}
}

func (r *runner) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// shutdown stops the runner; with release it also ends the program.
func (r *runner) shutdown(release bool) {
	r.stopOnce.Do(func() {
		r.releaseRT.Store(release)
		r.cancel()
	})
}

// run is the runner's life: lease, then serve the Session until it has
// nothing left to do, its lease is lost or the manager stops.
func (r *runner) run() {
	defer close(r.done)
	defer r.cancel()
	if s, err := r.m.st.GetSession(r.ctx, r.id); errors.Is(err, store.ErrNotFound) || (err == nil && s.State == platform.StateDeleted) {
		r.takeWake() // a deleted Session gets no lease (and so no stream row back) and no new runner
		return
	}
	lease, err := r.m.st.AcquireLease(r.ctx, r.id, r.m.cfg.Holder, r.m.cfg.LeaseTTL)
	if err != nil {
		if errors.Is(err, store.ErrConflict) {
			// A live replica holds the Session and was told of the work
			// itself: the wake that started this runner is spent, or the
			// manager would start another at once, and another, for as
			// long as the holder lives. A holder that dies is the sweep's.
			r.takeWake()
			r.log.Debug("session held elsewhere", "err", err)
		} else if r.ctx.Err() == nil {
			r.log.Warn("acquire session lease", "err", err)
		}
		return
	}
	r.epoch = lease.Epoch
	renewDone := make(chan struct{})
	go r.renew(renewDone)
	defer func() {
		r.cancel() // ends renew
		<-renewDone
		rel, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = r.m.st.ReleaseLease(rel, r.id, r.m.cfg.Holder, r.epoch)
	}()
	defer r.closeRuntime()
	if err := r.recoverFromLog(r.ctx); err != nil {
		r.log.Warn("recover session state from its log", "err", err)
		return
	}
	r.lastActive = time.Now()
	for {
		more, err := r.step()
		if err != nil {
			switch {
			case errors.Is(err, store.ErrFenced):
				// A write refused by the epoch: another replica holds the
				// Session now (this one was frozen or cut off meanwhile).
				r.log.Info("session lease lost to another holder; write refused, runner stopped", "epoch", r.epoch)
			case r.ctx.Err() == nil:
				r.log.Warn("session runner stopped", "err", err)
			}
			return
		}
		if !more {
			return
		}
	}
}

// renew keeps the lease until the runner ends; a lost lease stops it.
func (r *runner) renew(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.m.cfg.LeaseTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			_, err := r.m.st.RenewLease(r.ctx, r.id, r.m.cfg.Holder, r.epoch, r.m.cfg.LeaseTTL)
			if errors.Is(err, store.ErrFenced) {
				r.log.Warn("session lease lost to another holder; stopping")
				r.cancel()
				return
			}
			if err != nil && r.ctx.Err() == nil {
				r.log.Warn("renew session lease", "err", err)
			}
		}
	}
}

// step does one round: make sure a runtime exists if there is work,
// deliver pending inputs, then wait for something to happen. It returns
// false when the runner should end.
func (r *runner) step() (bool, error) {
	ctx := r.ctx
	sess, err := r.m.st.GetSession(ctx, r.id)
	if errors.Is(err, store.ErrNotFound) || (err == nil && sess.State == platform.StateDeleted) {
		r.takeWake() // nothing will come for it
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get session: %w", err)
	}
	pending, err := r.m.st.ListInputs(ctx, r.id, store.InputAccepted, store.InputDelivered)
	if err != nil {
		return false, fmt.Errorf("list inputs: %w", err)
	}
	if r.rt == nil {
		select {
		case <-r.m.draining:
			return false, nil // shutting down: the next holder builds it
		default:
		}
		if sess.SandboxID != "" && len(sess.Runtime) == 0 {
			if err := r.dropHalfBuilt(ctx, sess); err != nil {
				return false, err
			}
		}
		switch {
		case sess.SandboxID != "" && len(sess.Runtime) > 0:
			if err := r.attach(ctx, sess); err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				r.log.Info("runtime cannot be re-attached; recovering", "err", err)
				if err := r.lost(ctx, "runtime lost: "+err.Error()); err != nil {
					return false, err
				}
				return true, nil
			}
		case len(pending) > 0 || sess.State == platform.StateCreating:
			if err := r.build(ctx, sess); err != nil {
				if ctx.Err() != nil {
					return false, ctx.Err()
				}
				return r.buildFailed(ctx, pending, err)
			}
		default:
			r.log.Debug("session runner idle: no runtime and no input", "state", sess.State)
			return r.workSince(ctx) // nothing to do: a released or lost runtime waits for input
		}
	}
	// An interrupt or an answer goes to the reply in progress, before the
	// next input may start another.
	if err := r.carryOutRequests(ctx, sess); err != nil {
		return false, err
	}
	select {
	case <-r.m.draining:
		if r.turn == nil {
			return false, nil // hand the Session over between replies
		}
	default:
		if err := r.deliver(ctx, pending); err != nil {
			return false, err
		}
	}
	return r.wait(ctx)
}

// takeWake takes a wake-up waiting for the runner, if any.
func (r *runner) takeWake() {
	select {
	case <-r.wake:
	default:
	}
}

// workSince reports whether an input came in since the runner last read
// the store, when it is about to end with nothing to do. The wake-up that
// started it (or came since) is taken first and the store read once more:
// an input accepted meanwhile is not left without a runner, and a wake-up
// already answered does not start another runner at once, and another,
// for ever.
func (r *runner) workSince(ctx context.Context) (bool, error) {
	r.takeWake()
	pending, err := r.m.st.ListInputs(ctx, r.id, store.InputAccepted, store.InputDelivered)
	if err != nil {
		return false, fmt.Errorf("list inputs: %w", err)
	}
	return len(pending) > 0, nil
}

// wait handles the runtime's events and requests until a change needs a
// new step.
func (r *runner) wait(ctx context.Context) (bool, error) {
	idle := time.NewTimer(r.idleTimeout())
	defer idle.Stop()
	remote, stop := r.m.cfg.Notifier.Subscribe(platform.WakeStream(r.id))
	defer stop()
	draining := r.m.draining
	// The safety net for a lost notification of work recorded on another
	// replica: pending inputs and requests are looked for now and then.
	poll := time.NewTicker(inputPoll)
	defer poll.Stop()
	for {
		if draining == nil && r.turn == nil {
			return false, nil // draining, and the reply in progress ended
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-draining:
			draining = nil
		case <-r.wake:
			return true, nil
		case <-remote:
			return true, nil
		case <-poll.C:
			if r.undelivered(ctx) || r.requested(ctx) {
				return true, nil
			}
		case batch := <-r.rt.events:
			if err := r.handle(ctx, coalesce(batch, r.rt.events)); err != nil {
				return false, err
			}
			r.lastActive = time.Now()
			if r.turn == nil && r.abandoned == "" && r.rt.serial && r.undelivered(ctx) {
				return true, nil // the next input's turn
			}
			if !idle.Stop() {
				select {
				case <-idle.C:
				default:
				}
			}
			idle.Reset(r.idleTimeout())
		case err := <-r.rt.ended:
			if err := r.drain(ctx); err != nil {
				return false, err
			}
			if err := r.lost(ctx, err.Error()); err != nil {
				return false, err
			}
			return true, nil
		case n := <-r.rt.modelNotes():
			if _, err := r.append(ctx, r.control(n.typ, n.fields)); err != nil {
				return false, err
			}
		case <-r.mirrorDue():
			r.mirrorLater = nil
			if err := r.mirrorNative(ctx); err != nil {
				return false, err
			}
		case <-idle.C:
			if r.turn != nil {
				idle.Reset(r.idleTimeout())
				continue
			}
			pending, err := r.m.st.ListInputs(ctx, r.id, store.InputAccepted, store.InputDelivered)
			if err != nil {
				return false, err
			}
			if len(pending) > 0 {
				return true, nil
			}
			return false, r.releaseIdle(ctx)
		}
	}
}

// drain handles events the reader sent before it ended.
func (r *runner) drain(ctx context.Context) error {
	for {
		select {
		case batch := <-r.rt.events:
			if err := r.handle(ctx, batch); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

func (r *runner) idleTimeout() time.Duration {
	if r.rt != nil && r.rt.idle > 0 {
		return r.rt.idle
	}
	return r.m.cfg.IdleTimeout
}

// updateSession applies fn to the current record and stores it, retrying
// on a concurrent update.
func (r *runner) updateSession(ctx context.Context, fn func(*store.Session)) (*store.Session, error) {
	for {
		s, err := r.m.st.GetSession(ctx, r.id)
		if err != nil {
			return nil, fmt.Errorf("get session: %w", err)
		}
		fn(s)
		s.UpdatedAt = time.Time{}
		err = r.m.st.UpdateSession(ctx, s)
		if errors.Is(err, store.ErrConflict) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("update session: %w", err)
		}
		return s, nil
	}
}

// setState moves the Session to state, logging state.changed when it
// changes; more edits the record in the same update.
func (r *runner) setState(ctx context.Context, state, reason string, more func(*store.Session)) error {
	var from string
	if _, err := r.updateSession(ctx, func(s *store.Session) {
		from = s.State
		if s.State != platform.StateDeleted {
			s.State = state
		}
		if more != nil {
			more(s)
		}
	}); err != nil {
		return err
	}
	if from == state {
		return nil
	}
	payload, _ := json.Marshal(map[string]string{"from": from, "to": state, "reason": reason})
	_, err := r.append(ctx, store.LogEntry{Type: "state.changed", Payload: payload})
	return err
}

// append writes entries fenced by the runner's lease, counting them in
// the Session's log bytes.
func (r *runner) append(ctx context.Context, entries ...store.LogEntry) ([]store.LogEntry, error) {
	out, err := r.m.cfg.Log.Append(ctx, r.id, r.epoch, entries...)
	if err == nil {
		r.logBytes += entryBytes(entries)
	}
	return out, err
}

// maxCoalesce bounds how many decoded output events one log append takes.
const maxCoalesce = 512

// coalesce merges into b the batches already waiting in ch, without
// waiting for more: while the writer is busy appending, output piles up
// and is then written in one transaction, so a program printing token by
// token costs one commit per round, not one per token, and no frame waits
// for a timer.
func coalesce(b batch, ch <-chan batch) batch {
	for len(b.events) < maxCoalesce {
		select {
		case more := <-ch:
			b.events = append(b.events, more.events...)
			if more.source > 0 {
				b.source = more.source
			}
		default:
			return b
		}
	}
	return b
}

// inputPoll is how often a holder looks for inputs and requests it was
// not told of.
const inputPoll = 2 * time.Second

// undelivered reports whether the Session has accepted inputs this
// runtime has not written to its program yet.
func (r *runner) undelivered(ctx context.Context) bool {
	if r.rt == nil {
		return false
	}
	pending, err := r.m.st.ListInputs(ctx, r.id, store.InputAccepted)
	if err != nil {
		return false
	}
	for _, in := range pending {
		if !r.rt.sent[in.ID] {
			return true
		}
	}
	return false
}
