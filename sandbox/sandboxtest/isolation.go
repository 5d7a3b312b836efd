package sandboxtest

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// countMarker counts the processes of the box whose command line names
// the marker that testIsolation starts in box a.
const countMarker = "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'astrabox-marke[r]-a'"

// testIsolation checks that two boxes of an isolating backend see nothing
// of each other: files or processes.
func testIsolation(t *testing.T, h Harness) {
	isolating(t, h)
	a := NewBox(t, h, nil)
	b := NewBox(t, h, nil)
	// The marker runs in the background: the command waits (up to 5 s)
	// until it has taken its name, so the checks below do not race it.
	shell(t, a, nil, "echo secret > /workspace/a-only; (exec -a astrabox-marker-a sleep 300) > /dev/null 2>&1 & "+
		"for i in $(seq 50); do [ \"$("+countMarker+")\" = 1 ] && break; sleep 0.1; done; echo started")
	if code, _, _ := shell(t, b, nil, "test -e /workspace/a-only"); code == 0 {
		t.Fatal("box b sees box a's file")
	}
	if _, out, _ := shell(t, a, nil, countMarker); strings.TrimSpace(out) != "1" {
		t.Fatalf("box a does not see its own marker process: %q", out)
	}
	if _, out, _ := shell(t, b, nil, countMarker); strings.TrimSpace(out) != "0" {
		t.Fatal("box b sees box a's processes")
	}
	_, out, _ := shell(t, b, nil, "ls -d /proc/[0-9]* | wc -l")
	if n, err := strconv.Atoi(strings.TrimSpace(out)); err != nil || n < 1 || n > 9 {
		t.Fatalf("box b sees %q processes; want only its own few", out)
	}
}

// testOrphans checks the two kinds of orphan a backend must handle: the
// processes a box's workload abandons (its PID 1 reaps them), and boxes
// the backend holds that a crash left without a record (List finds them,
// Delete removes them). Each subtest gets a fresh box.
func testOrphans(t *testing.T, h Harness) {
	p := h.Provider()
	checkGone := func(t *testing.T, id string) {
		t.Helper()
		if _, err := p.Inspect(ctxFor(t, time.Minute), id); !errors.Is(err, sandbox.ErrNotFound) {
			t.Fatalf("inspect after delete: %v, want ErrNotFound", err)
		}
		if lc, ok := h.(LeakChecker); ok {
			lc.CheckGone(t, id)
		}
	}

	t.Run("ProcessesAreReaped", func(t *testing.T) {
		isolating(t, h)
		b := NewBox(t, h, nil)
		// 200 double-forked processes that exit at once: their zombies
		// belong to PID 1 of the box, which must reap them; a stopped
		// daemon stays.
		shell(t, b, nil, `for i in $(seq 200); do (true &) ; done; (sleep 300 & kill -STOP $!) ; true`)
		eventually(t, time.Minute, "zombies to be reaped", func() bool {
			_, out, _ := shell(t, b, nil, `grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
			return strings.TrimSpace(out) == "0"
		})
		if _, out, _ := shell(t, b, nil, `grep -l '^State:.*T' /proc/[0-9]*/status | wc -l`); strings.TrimSpace(out) != "1" {
			t.Fatalf("want the one stopped daemon, got %s", out)
		}
		if err := p.Delete(ctxFor(t, time.Minute), b.ID); err != nil {
			t.Fatal(err)
		}
		checkGone(t, b.ID)
	})

	listed := func(t *testing.T, id string, state sandbox.State) {
		t.Helper()
		list, err := p.List(ctxFor(t, time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(list, func(i sandbox.Info) bool { return i.ID == id && i.State == state }) {
			t.Fatalf("List does not show %s %s: %+v", id, state, list)
		}
	}

	t.Run("ListedRunning", func(t *testing.T) {
		b := NewBox(t, h, nil)
		listed(t, b.ID, sandbox.StateRunning)
		if err := p.Delete(ctxFor(t, time.Minute), b.ID); err != nil {
			t.Fatal(err)
		}
		checkGone(t, b.ID)
	})

	t.Run("RecordLost", func(t *testing.T) {
		o, ok := h.(Orphaner)
		if !ok {
			t.Skip("the harness cannot drop a box's record (Orphaner)")
		}
		b := NewBox(t, h, nil)
		o.Orphan(t, b.ID)
		listed(t, b.ID, sandbox.StateFailed)
		if err := p.Delete(ctxFor(t, time.Minute), b.ID); err != nil {
			t.Fatal(err)
		}
		checkGone(t, b.ID)
		if list, err := p.List(ctxFor(t, time.Minute)); err != nil || slices.ContainsFunc(list, func(i sandbox.Info) bool { return i.ID == b.ID }) {
			t.Fatalf("List after delete: %+v %v", list, err)
		}
	})
}
