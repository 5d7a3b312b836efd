// Package wait is the tests' one way to wait for something they expect to
// happen in the background: poll a condition until it holds, with a bound
// that is a failure bound, never a latency requirement (a test asserts
// what happens, not how fast; benchmarks measure speed).
package wait

import (
	"testing"
	"time"
)

// maxInterval is the longest pause between two polls: the first polls
// come quickly (1 ms, doubling), so a condition that holds soon is seen
// soon, and a slow one costs few polls.
const maxInterval = 50 * time.Millisecond

// Until polls cond until it holds, and fails t (naming what) if it still
// does not after within. cond runs on the test's goroutine.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for pause := time.Millisecond; !cond(); pause = min(2*pause, maxInterval) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(pause)
	}
}
