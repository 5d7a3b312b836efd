package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

func testEvents(t *testing.T, st store.Store) {
	ctx := t.Context()
	in := []store.Event{
		{SandboxID: "a", State: sandbox.StatePending, Reason: "created", At: at(0)},
		{SandboxID: "b", State: sandbox.StatePending, At: at(time.Second)},
		{SandboxID: "a", State: sandbox.StateRunning, Reason: "started", At: at(2 * time.Second)},
		{SandboxID: "a", State: sandbox.StateTerminated, Reason: "expired", At: at(3 * time.Second)},
		{SandboxID: "b", State: sandbox.StateFailed, Reason: "image not found", At: at(4 * time.Second)},
	}
	var last int64
	for i := range in {
		seq, err := st.AppendEvent(ctx, in[i])
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if seq <= last {
			t.Fatalf("seq %d after %d, want increasing", seq, last)
		}
		in[i].Seq, last = seq, seq
	}
	a := []store.Event{in[0], in[2], in[3]}
	tests := []struct {
		name     string
		id       string
		afterSeq int64
		want     []store.Event
	}{
		{"all of a", "a", 0, a},
		{"after the first", "a", in[0].Seq, a[1:]},
		{"after a seq of another box", "a", in[1].Seq, a[1:]},
		{"after the last", "a", in[3].Seq, nil},
		{"negative", "a", -1, a},
		{"all of b", "b", 0, []store.Event{in[1], in[4]}},
		{"unknown box", "c", 0, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.Events(ctx, tc.id, tc.afterSeq)
			if err != nil {
				t.Fatalf("events: %v", err)
			}
			checkEvents(t, got, tc.want)
		})
	}

	// A zero At is the time of the append.
	before := time.Now()
	seq, err := st.AppendEvent(ctx, store.Event{SandboxID: "z", State: sandbox.StateRunning})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	got, err := st.Events(ctx, "z", 0)
	if err != nil || len(got) != 1 || got[0].Seq != seq {
		t.Fatalf("events of z = %v, %v", got, err)
	}
	if got[0].At.Before(before.Add(-time.Second)) || got[0].At.After(time.Now().Add(time.Second)) {
		t.Errorf("At of an event appended without one = %v, want about now", got[0].At)
	}
}

// checkEvents fails t unless got equals want (times as read from a store).
func checkEvents(t *testing.T, got, want []store.Event) {
	t.Helper()
	if len(got) != len(want) {
		seqs := func(es []store.Event) map[int64]bool {
			m := make(map[int64]bool, len(es))
			for _, e := range es {
				m[e.Seq] = true
			}
			return m
		}
		g, w := seqs(got), seqs(want)
		var missing, extra []int64
		for _, e := range want {
			if !g[e.Seq] {
				missing = append(missing, e.Seq)
			}
		}
		for _, e := range got {
			if !w[e.Seq] {
				extra = append(extra, e.Seq)
			}
		}
		t.Fatalf("got %d events, want %d; seqs missing %v, unexpected %v", len(got), len(want), missing, extra)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Seq != w.Seq || g.SandboxID != w.SandboxID || g.State != w.State || g.Reason != w.Reason || !sameTime(g.At, w.At) {
			t.Errorf("event %d = %+v, want %+v", i, g, w)
		}
	}
}

// testEventsFollow appends from several goroutines while a follower reads
// with afterSeq set to the last Seq it saw: it must miss nothing, which
// requires that a sandbox's events become visible in Seq order.
func testEventsFollow(t *testing.T, st store.Store) {
	ctx := t.Context()
	const writers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				e := store.Event{SandboxID: "box", State: sandbox.StateRunning, Reason: fmt.Sprintf("w%d-%d", w, i), At: at(0)}
				if _, err := st.AppendEvent(ctx, e); err != nil {
					errs <- err
					return
				}
				// Another sandbox's events interleave in the seq space.
				if _, err := st.AppendEvent(ctx, store.Event{SandboxID: "other", State: sandbox.StateRunning, At: at(0)}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var seen []store.Event
	var after int64
	deadline := time.Now().Add(2 * time.Minute)
	for finished := false; ; {
		got, err := st.Events(ctx, "box", after)
		if err != nil {
			t.Fatalf("events: %v", err)
		}
		for _, e := range got {
			if e.Seq <= after {
				t.Fatalf("events after %d returned seq %d", after, e.Seq)
			}
			after = e.Seq
		}
		seen = append(seen, got...)
		if finished { // this read began after every append had returned
			break
		}
		select { // poll every few milliseconds, at once when the appends are done
		case <-done:
			finished = true
		case <-time.After(2 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("appends did not finish in time")
		}
	}
	close(errs)
	for err := range errs {
		t.Fatalf("append: %v", err)
	}
	all, err := st.Events(ctx, "box", 0)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if len(all) != writers*each {
		t.Fatalf("stored %d events, want %d", len(all), writers*each)
	}
	checkEvents(t, seen, all)
}
