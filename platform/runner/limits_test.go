package runner

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
)

func TestCharge(t *testing.T) {
	limits := lifecycle.SessionLimits{ReplyBytes: 1000, ReplyFrames: 10, SessionBytes: 5000, FramesPerSecond: 1_000}
	tests := []struct {
		name     string
		frames   int64 // of the reply so far
		bytes    int64
		logBytes int64
		pending  int64
		payload  int64
		want     sandbox.Code // "" when charged
	}{
		{"within", 3, 100, 1000, 50, 100, ""},
		{"the last frame allowed", 9, 100, 1000, 0, 100, ""},
		{"one frame too many", 10, 100, 1000, 0, 1, CodeReplyFramesExceeded},
		{"the reply's bytes exactly", 1, 900, 1000, 0, 100, ""},
		{"one byte over the reply's", 1, 900, 1000, 0, 101, CodeReplyBytesExceeded},
		{"the session's log full", 1, 10, 4990, 0, 11, CodeSessionBytesExceeded},
		{"entries not yet appended count", 1, 10, 4000, 995, 10, CodeSessionBytesExceeded},
	}
	now := time.Unix(1_700_000_000, 0)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{limits: limits, rate: newBucket(limits.FramesPerSecond), logBytes: tc.logBytes,
				turn: &turn{frames: tc.frames, bytes: tc.bytes}}
			o := r.charge(tc.payload, tc.pending, now)
			var got sandbox.Code
			if o != nil {
				got = o.code
			}
			if got != tc.want {
				t.Fatalf("charge = %q (%v), want %q", got, o, tc.want)
			}
			wantFrames, wantBytes := tc.frames+1, tc.bytes+tc.payload
			if o != nil {
				wantFrames, wantBytes = tc.frames, tc.bytes // nothing counted
			}
			if r.turn.frames != wantFrames || r.turn.bytes != wantBytes {
				t.Fatalf("reply at %d frames, %d bytes; want %d, %d", r.turn.frames, r.turn.bytes, wantFrames, wantBytes)
			}
		})
	}
}

// TestChargeRate: the bucket holds burstSeconds of frames_per_second; past
// it, at the same instant, a frame passes the rate; a second later the
// rate's worth passes again.
func TestChargeRate(t *testing.T) {
	limits := lifecycle.SessionLimits{ReplyFrames: 1 << 30, ReplyBytes: 1 << 30, SessionBytes: 1 << 30, FramesPerSecond: 3}
	r := &runner{limits: limits, rate: newBucket(limits.FramesPerSecond), turn: &turn{}}
	now := time.Unix(1_700_000_000, 0)
	r.rate.AllowN(now, 0) // the bucket's clock starts now, full
	for i := range 3 * burstSeconds {
		if o := r.charge(10, 0, now); o != nil {
			t.Fatalf("frame %d of the burst: %v", i, o)
		}
	}
	o := r.charge(10, 0, now)
	if o == nil || o.code != CodeFrameRateExceeded {
		t.Fatalf("a frame past the burst: %v, want %s", o, CodeFrameRateExceeded)
	}
	later := now.Add(time.Second)
	for i := range 3 {
		if o := r.charge(10, 0, later); o != nil {
			t.Fatalf("frame %d a second later: %v", i, o)
		}
	}
	if o := r.charge(10, 0, later); o == nil {
		t.Fatal("a fourth frame in that second passed")
	}
}

func TestApplyLimits(t *testing.T) {
	server := DefaultLimits
	server.ReplyFrames = 500 // the server's configuration
	m := &Manager{cfg: Config{Limits: server}}
	tests := []struct {
		name    string
		profile *lifecycle.SessionLimits
		want    lifecycle.SessionLimits
	}{
		{"no session_limits", nil, server},
		{"empty session_limits", &lifecycle.SessionLimits{}, server},
		{"the profile's over the server's", &lifecycle.SessionLimits{ReplyFrames: 7, NativeStateBytes: 1 << 20},
			func() lifecycle.SessionLimits { l := server; l.ReplyFrames, l.NativeStateBytes = 7, 1<<20; return l }()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{m: m}
			r.applyLimits(lifecycle.Profile{SessionLimits: tc.profile})
			if r.limits != tc.want {
				t.Fatalf("limits %+v, want %+v", r.limits, tc.want)
			}
			if r.rate.Burst() != int(tc.want.FramesPerSecond*burstSeconds) || float64(r.rate.Limit()) != float64(tc.want.FramesPerSecond) {
				t.Fatalf("bucket %v/s burst %d", r.rate.Limit(), r.rate.Burst())
			}
		})
	}
}

func TestMirrorWait(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		name        string
		lastMirror  time.Time
		turnStarted *time.Time // nil: no reply in progress
		want        time.Duration
	}{
		{"never mirrored", time.Time{}, nil, 0},
		{"mirrored long ago", now.Add(-time.Hour), nil, 0},
		{"mirrored just now", now, nil, mirrorInterval},
		{"mirrored 4 s ago", now.Add(-4 * time.Second), nil, mirrorInterval - 4*time.Second},
		{"a reply just started", time.Time{}, &now, mirrorInterval},
		{"a reply running long", now.Add(-time.Hour), ptr(now.Add(-time.Hour)), 0},
		{"a long reply mirrored 1 s ago", now.Add(-time.Second), ptr(now.Add(-time.Hour)), mirrorInterval - time.Second},
		{"a reply recovered from the log", time.Time{}, &time.Time{}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := &runner{lastMirror: tc.lastMirror}
			if tc.turnStarted != nil {
				r.turn = &turn{started: *tc.turnStarted}
			}
			if got := r.mirrorWait(now); got != tc.want {
				t.Fatalf("mirrorWait = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStateGrewIsRateLimited: the program's hints that its state grew,
// however many, start at most one mirror per mirrorInterval; a hint that
// comes sooner is kept (one timer), not dropped, and is due (mirrorDue)
// exactly mirrorInterval after the last mirror. It runs in a synctest
// bubble: the kept timer is the bubble's, nothing waits for real.
func TestStateGrewIsRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		r := &runner{lastMirror: now}
		for range 1000 {
			if fn := r.stateGrew(now); fn != nil {
				t.Fatal("a hint right after a mirror mirrors again")
			}
		}
		if r.mirrorLater == nil || r.mirrorDue() == nil {
			t.Fatal("the hint was dropped, not kept for later")
		}
		kept := r.mirrorLater
		r.stateGrew(now)
		if r.mirrorLater != kept {
			t.Fatal("a second hint armed another timer")
		}
		time.Sleep(mirrorInterval - time.Nanosecond)
		synctest.Wait()
		select {
		case <-r.mirrorDue():
			t.Fatalf("the kept hint was due %v after the last mirror, want %v", time.Since(now), mirrorInterval)
		default:
		}
		if r.stateGrew(time.Now()) != nil || r.mirrorLater != kept {
			t.Fatal("a hint just before the interval mirrors or arms another timer")
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		select {
		case <-r.mirrorDue():
		default:
			t.Fatalf("the kept hint was not due %v after the last mirror", mirrorInterval)
		}
		kept.Stop()
		r.mirrorLater = nil
		if r.stateGrew(now.Add(mirrorInterval)) == nil {
			t.Fatal("a hint an interval later does not mirror")
		}
	})
}

func ptr[T any](v T) *T { return &v }
