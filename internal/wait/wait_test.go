package wait

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

// TestUntil: a condition that comes true ends the wait; one that never
// does fails it, naming what was awaited.
func TestUntil(t *testing.T) {
	var n atomic.Int32
	Until(t, 10*time.Second, "the third poll", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("polled %d times, want 3", n.Load())
	}

	f := &fakeT{TB: t}
	func() {
		defer func() {
			if r := recover(); r != f {
				panic(r)
			}
		}()
		Until(f, 20*time.Millisecond, "nothing", func() bool { return false })
	}()
	if !strings.Contains(f.failed, "timed out") {
		t.Fatalf("a condition that never holds: failure %q", f.failed)
	}
}
