// Package notifiertest is the conformance suite every streamlog.Notifier
// passes, the in-process one and the one that crosses replicas alike: a
// Notify wakes the stream's subscribers (at once on its own notifier, soon
// on the others), wake-ups coalesce to one pending, other streams are not
// woken, a cancelled subscription hears nothing more, any stream name
// travels, and concurrent use is safe.
package notifiertest

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store/streamlog"
)

// Deadline bounds every wait for a wake-up the suite expects; it is a
// failure bound, not a latency requirement.
const Deadline = 30 * time.Second

// Pair returns two notifiers that share wake-ups, as two replicas on one
// database do (a single-process notifier returns itself twice). Both stay
// usable until t ends.
type Pair func(t *testing.T) (a, b streamlog.Notifier)

// Run runs the suite against the notifiers pair makes (a new pair for
// each test).
func Run(t *testing.T, pair Pair) {
	t.Run("LocalWakeAtOnce", func(t *testing.T) { testLocalWake(t, pair) })
	t.Run("Coalesces", func(t *testing.T) { testCoalesces(t, pair) })
	t.Run("OtherStreams", func(t *testing.T) { testOtherStreams(t, pair) })
	t.Run("Cancel", func(t *testing.T) { testCancel(t, pair) })
	t.Run("AcrossReplicas", func(t *testing.T) { testAcross(t, pair) })
	t.Run("Names", func(t *testing.T) { testNames(t, pair) })
	t.Run("Concurrent", func(t *testing.T) { testConcurrent(t, pair) })
}

// await fails t unless ch receives within Deadline.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(Deadline):
		t.Fatalf("%s: not woken within %v", what, Deadline)
	}
}

// pending reports whether ch holds a wake-up, consuming it.
func pending(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// testLocalWake: a Notify wakes the notifier's own subscribers before it
// returns (a follower in the same process never waits for a round trip).
func testLocalWake(t *testing.T, pair Pair) {
	a, _ := pair(t)
	ch, cancel := a.Subscribe("s")
	defer cancel()
	a.Notify("s")
	if !pending(ch) {
		t.Fatal("a local Notify did not wake the subscriber before it returned")
	}
}

// testCoalesces: several wake-ups leave at most one pending.
func testCoalesces(t *testing.T, pair Pair) {
	a, _ := pair(t)
	ch, cancel := a.Subscribe("s")
	defer cancel()
	for range 3 {
		a.Notify("s")
	}
	if !pending(ch) {
		t.Fatal("not woken")
	}
	if pending(ch) {
		t.Fatal("three notifies left more than one wake-up pending")
	}
}

// testOtherStreams: a Notify wakes only the named stream's subscribers, on
// both notifiers. A marker stream notified afterwards bounds the wait for
// a wrong wake-up that would cross replicas.
func testOtherStreams(t *testing.T, pair Pair) {
	a, b := pair(t)
	otherA, cancel1 := a.Subscribe("other")
	defer cancel1()
	otherB, cancel2 := b.Subscribe("other")
	defer cancel2()
	marker, cancel3 := b.Subscribe("marker")
	defer cancel3()
	a.Notify("s")
	a.Notify("marker")
	await(t, marker, "marker")
	if pending(otherA) || pending(otherB) {
		t.Fatal("a subscriber of another stream was woken")
	}
}

// testCancel: a cancelled subscription hears nothing more, from either
// notifier; cancel is idempotent and leaves the stream's other
// subscribers subscribed.
func testCancel(t *testing.T, pair Pair) {
	a, b := pair(t)
	gone, cancel := a.Subscribe("s")
	kept, cancelKept := a.Subscribe("s")
	defer cancelKept()
	cancel()
	cancel()
	a.Notify("s")
	if pending(gone) {
		t.Error("a cancelled subscriber was woken by a local Notify")
	}
	if !pending(kept) {
		t.Error("the remaining subscriber was not woken")
	}
	b.Notify("s")
	await(t, kept, "the remaining subscriber, from the other notifier")
	if pending(gone) {
		t.Error("a cancelled subscriber was woken by the other notifier")
	}
}

// testAcross: a Notify on one notifier wakes the stream's subscribers on
// the other, both ways.
func testAcross(t *testing.T, pair Pair) {
	a, b := pair(t)
	onA, cancelA := a.Subscribe("s")
	defer cancelA()
	onB, cancelB := b.Subscribe("s")
	defer cancelB()
	a.Notify("s")
	await(t, onB, "a to b")
	pending(onA)
	b.Notify("s")
	await(t, onA, "b to a")
}

// testNames: any stream name travels: long, not ASCII, with separators
// and control characters; names that differ only late stay apart.
func testNames(t *testing.T, pair Pair) {
	a, b := pair(t)
	long := strings.Repeat("s", 10_000)
	names := []string{long, long[:9_999] + "t", "ünïcødé/strëam", "a/b=c#d", "tab\tnewline\n\x00", "x"}
	subs := make([]<-chan struct{}, len(names))
	for i, n := range names {
		ch, cancel := b.Subscribe(n)
		defer cancel()
		subs[i] = ch
	}
	for i, n := range names {
		a.Notify(n)
		await(t, subs[i], fmt.Sprintf("stream %.20q", n))
		for j := range subs {
			if j != i && pending(subs[j]) {
				t.Fatalf("a Notify of %.20q woke %.20q", n, names[j])
			}
		}
	}
}

// testConcurrent: subscribing, notifying and cancelling from many
// goroutines at once is safe (run with -race), and a subscription that
// stays gets its wake-up.
func testConcurrent(t *testing.T, pair Pair) {
	a, b := pair(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := a
			if g%2 == 1 {
				n = b
			}
			for i := range 50 {
				name := fmt.Sprintf("c%d", i%5)
				_, cancel := n.Subscribe(name)
				n.Notify(name)
				cancel()
			}
		}()
	}
	wg.Wait()
	ch, cancel := b.Subscribe("c0")
	defer cancel()
	a.Notify("c0")
	await(t, ch, "after the concurrent use")
}
