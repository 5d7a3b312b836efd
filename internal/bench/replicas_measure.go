package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/astrabox/astrabox/platform/wire"
)

// cluster is the replicas bench's running replicas and a client of each.
type cluster struct {
	reps  []*replicaProc
	envs  []*platformEnv
	model *benchModel
	agent string
	lease time.Duration
}

// follower reads a Session's raw events stream on one replica into a
// channel until its context ends.
type follower struct {
	frames chan followed
	errc   chan error
	cancel context.CancelFunc
}

// followed is one entry as a follower received it.
type followed struct {
	streamFrame
	InputID string
}

// follow opens sid's events stream on e after seq after.
func follow(ctx context.Context, e *platformEnv, sid string, after int64) (*follower, error) {
	ctx, cancel := context.WithCancel(ctx)
	s, err := e.openStream(ctx, fmt.Sprintf("/api/v1/sessions/%s/events?after_seq=%d", sid, after))
	if err != nil {
		cancel()
		return nil, err
	}
	f := &follower{frames: make(chan followed, 4096), errc: make(chan error, 1), cancel: cancel}
	go func() {
		defer s.close()
		for {
			fr, err := s.next()
			if err != nil {
				f.errc <- err
				return
			}
			var body struct {
				InputID string `json:"input_id"`
			}
			_ = json.Unmarshal([]byte(fr.Data), &body)
			select {
			case f.frames <- followed{fr, body.InputID}:
			case <-ctx.Done():
				f.errc <- ctx.Err()
				return
			}
		}
	}()
	return f, nil
}

// until returns the first entry for which match is true, skipping the
// others, within timeout.
func (f *follower) until(timeout time.Duration, what string, match func(followed) bool) (followed, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case fr := <-f.frames:
			if match(fr) {
				return fr, nil
			}
		case err := <-f.errc:
			return followed{}, fmt.Errorf("events stream ended waiting for %s: %w", what, err)
		case <-t.C:
			return followed{}, fmt.Errorf("no %s within %v", what, timeout)
		}
	}
}

// sessionInfo reads a Session through e.
func (e *platformEnv) sessionInfo(ctx context.Context, sid string) (wire.Session, error) {
	var s wire.Session
	err := e.call(ctx, http.StatusOK, "GET", "/api/v1/sessions/"+sid, nil, &s)
	return s, err
}

// sendInput posts an input and returns its id.
func (e *platformEnv) sendInput(ctx context.Context, sid, content string) (string, error) {
	var rc struct {
		InputID string `json:"input_id"`
	}
	err := e.call(ctx, http.StatusCreated, "POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": content}, &rc)
	return rc.InputID, err
}

// waitSettled polls the session through e until it is READY or
// RECOVERY_REQUIRED (a runtime lost with its host waits for the next input).
func (e *platformEnv) waitSettled(ctx context.Context, sid string, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	for {
		s, err := e.sessionInfo(ctx, sid)
		if err == nil && (s.State == wire.SessionReady || s.State == wire.SessionRecoveryRequired) {
			return string(s.State), nil
		}
		if time.Now().After(deadline) {
			return string(s.State), fmt.Errorf("session %s is %s after %v (%v), want READY or RECOVERY_REQUIRED", sid, s.State, timeout, err)
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// measureWakes has replica A open a Session (A holds it, or B after a
// takeover: the rows follow the holder) and sends 2n inputs, through
// A and B in turn, with a follower of the Session's log on each replica.
// Rows: input accepted → seen by the follower on the other replica
// (LISTEN/NOTIFY), beside the follower on the same replica (an in-process
// wake); input accepted by B, which does not hold the Session → the
// holder A starts the reply (turn.started), beside inputs to A itself.
// Every clock starts just before the POST.
func (c *cluster) measureWakes(ctx context.Context, n int) ([]PlatformRow, error) {
	a, b := c.envs[0], c.envs[1]
	sid, err := a.newSession(ctx, c.agent)
	if err != nil {
		return nil, err
	}
	defer a.deleteSession(context.WithoutCancel(ctx), sid)
	if err := a.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
		return nil, err
	}
	s, err := b.sessionInfo(ctx, sid)
	if err != nil {
		return nil, err
	}
	// The replica that opened the Session holds it, unless its lease
	// lapsed meanwhile (a loaded host, a short lease) and the other took
	// it over: the rows are about the holder, whichever it is.
	holder := -1
	for i, r := range c.reps {
		if s.Runtime.Holder != nil && *s.Runtime.Holder == r.url() {
			holder = i
		}
	}
	if holder < 0 {
		return nil, fmt.Errorf("bench: the Session is held by %q, no replica of the bench", deref(s.Runtime.Holder))
	}
	fs := make([]*follower, 2)
	for i, e := range c.envs {
		if fs[i], err = follow(ctx, e, sid, s.LastSeq); err != nil {
			return nil, err
		}
		defer fs[i].cancel()
	}
	var other, same, viaHolder, viaOther []time.Duration
	for i := range 2 * n {
		via := i % 2
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond) // no lockstep with any timer
		t0 := time.Now()
		in, err := c.envs[via].sendInput(ctx, sid, fmt.Sprintf("input %d", i))
		if err != nil {
			return nil, err
		}
		accepted := func(f followed) bool { return f.Type == "input.accepted" && f.InputID == in }
		seenSame, err := fs[via].until(replyTimeout, "input.accepted on the accepting replica", accepted)
		if err != nil {
			return nil, err
		}
		seenOther, err := fs[1-via].until(replyTimeout, "input.accepted on the other replica", accepted)
		if err != nil {
			return nil, err
		}
		same, other = append(same, seenSame.At.Sub(t0)), append(other, seenOther.At.Sub(t0))
		started, err := fs[0].until(replyTimeout, "turn.started", func(f followed) bool { return f.Type == "turn.started" && f.InputID == in })
		if err != nil {
			return nil, err
		}
		if via == holder {
			viaHolder = append(viaHolder, started.At.Sub(t0))
		} else {
			viaOther = append(viaOther, started.At.Sub(t0))
		}
		for _, f := range fs {
			if _, err := f.until(replyTimeout, "turn.ended", func(f followed) bool { return f.Type == "turn.ended" && f.InputID == in }); err != nil {
				return nil, err
			}
		}
		if err := a.waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
			return nil, err
		}
	}
	rows := []PlatformRow{
		PlatformRow{Scenario: "input accepted → follower on the other replica sees it", Backend: "native",
			Subject: seriesOf("LISTEN/NOTIFY", other),
			Note:    "POST turn-inputs → its input.accepted on the events stream; through A and B in turn"}.withReference(seriesOf("follower on the same replica", same)),
		PlatformRow{Scenario: "input to a non-holder → holder starts the reply", Backend: "native",
			Subject: seriesOf("via B (LISTEN/NOTIFY)", viaOther),
			Note:    "POST turn-inputs → turn.started written by the holder A; without a notification the holder's input poll (2 s) finds it"}.withReference(seriesOf("via the holder A", viaHolder)),
	}
	return rows, nil
}

// takeoverShape is the reply killed mid-way: 2,000 deltas 5 ms apart (10 s).
var takeoverShape = replyShape{Deltas: 2000, Gap: 5 * time.Millisecond}

// measureTakeovers kills the holder of a Session with kill -9 k times
// mid-reply, each time with a follower on the other replica, and times
// from the kill to the first entry that follower receives beyond what
// the log held at the kill: the survivor's first write as the Session's
// new holder. The killed replica is started again on its data dir before
// the next sample, whose holder is the survivor.
func (c *cluster) measureTakeovers(ctx context.Context, k int) (PlatformRow, error) {
	sid, err := c.envs[0].newSession(ctx, c.agent)
	if err != nil {
		return PlatformRow{}, err
	}
	defer c.envs[0].deleteSession(context.WithoutCancel(ctx), sid)
	if err := c.envs[0].waitState(ctx, sid, "READY", runtimeTimeout); err != nil {
		return PlatformRow{}, err
	}
	c.model.setShape(takeoverShape)
	defer c.model.setShape(defaultShape)
	var ds []time.Duration
	firsts := map[string]int{}
	via := 0
	for i := range k {
		// Whichever replica takes the lease holds the reply (the one the
		// input reached, or one whose sweep saw it first): a follower on
		// each, and the holder's is let go once the holder is known.
		s, err := c.envs[0].sessionInfo(ctx, sid)
		if err != nil {
			return PlatformRow{}, err
		}
		fls := make([]*follower, len(c.envs))
		for j, e := range c.envs {
			if fls[j], err = follow(ctx, e, sid, s.LastSeq); err != nil {
				return PlatformRow{}, err
			}
			defer fls[j].cancel()
		}
		in, err := c.envs[via].sendInput(ctx, sid, fmt.Sprintf("takeover %d", i))
		if err != nil {
			return PlatformRow{}, err
		}
		if _, err := fls[0].until(replyTimeout, "the reply's first text-delta", func(fr followed) bool { return fr.Type == "text-delta" && fr.InputID == in }); err != nil {
			return PlatformRow{}, err
		}
		if s, err = c.envs[0].sessionInfo(ctx, sid); err != nil {
			return PlatformRow{}, err
		}
		holder := -1
		for j, p := range c.reps {
			if s.Runtime.Holder != nil && *s.Runtime.Holder == p.url() {
				holder = j
			}
		}
		if holder < 0 {
			return PlatformRow{}, fmt.Errorf("bench: takeover %d: the reply in progress has no live holder (%s)", i, s.State)
		}
		fls[holder].cancel()
		f, fl := c.envs[1-holder], fls[1-holder]
		time.Sleep(time.Duration(rand.N(int64(c.lease / 3)))) // the kill falls anywhere in a renewal period
		c.reps[holder].kill9()
		killed := time.Now()
		s, err = f.sessionInfo(ctx, sid)
		if err != nil {
			return PlatformRow{}, err
		}
		next, err := fl.until(replyTimeout, "an entry from the new holder", func(fr followed) bool { return fr.Seq > s.LastSeq })
		if err != nil {
			return PlatformRow{}, err
		}
		ds = append(ds, next.At.Sub(killed))
		firsts[next.Type]++
		if _, err := fl.until(replyTimeout, "the reply's end", func(fr followed) bool { return fr.Type == "turn.ended" && fr.InputID == in }); err != nil {
			return PlatformRow{}, err
		}
		fl.cancel()
		if err := c.reps[holder].start(ctx); err != nil {
			return PlatformRow{}, err
		}
		if _, err := f.waitSettled(ctx, sid, runtimeTimeout); err != nil {
			return PlatformRow{}, err
		}
		via = 1 - holder // the next input reaches the survivor
	}
	var types []string
	for t, n := range firsts {
		types = append(types, fmt.Sprintf("%s ×%d", t, n))
	}
	sort.Strings(types)
	bound := 2 * c.lease
	row := PlatformRow{Scenario: "takeover: kill -9 of the holder → next frame on the other replica", Backend: "native",
		Subject: seriesOf("kill -9 → next entry", ds)}
	row.Aim = atMost(float64(bound.Milliseconds()), "ms", "p99 (bound: lease + sweep)", row.Subject.P99)
	row.Note = fmt.Sprintf("lease %v renewed every %v, sweep every %v: the lease runs out within a lease of the kill, the next sweep "+
		"wakes the survivor within another; a native box is its host's only, so the reply in progress ends and the next "+
		"input recovers the Session; first entry after the kill: %s", c.lease, (c.lease / 3).Round(time.Millisecond), c.lease, strings.Join(types, ", "))
	return row, nil
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
