package storetest

import (
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// testSandboxStreamRetention: the streams of sandboxes whose records are
// gone go once their last entry is older than the retention; a live
// sandbox's, a recent one's and other streams stay.
func testSandboxStreamRetention(t *testing.T, st store.Store) {
	ctx := t.Context()
	old, recent := time.Now().Add(-2*time.Hour), time.Now()
	appendAt := func(stream string, at time.Time) {
		t.Helper()
		if _, err := st.Append(ctx, stream, 0, []store.LogEntry{{Type: "state", Payload: []byte(`{}`), At: at}, {Type: "state", At: at}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.CreateSandbox(ctx, newSandbox("sbx-live")); err != nil {
		t.Fatal(err)
	}
	streams := map[string]bool{ // stream: kept
		store.SandboxStreamPrefix + "sbx-live":   true,  // its record lives, however old its events
		store.SandboxStreamPrefix + "sbx-gone":   false, // deleted long ago
		store.SandboxStreamPrefix + "sbx-gone-2": false,
		store.SandboxStreamPrefix + "sbx-recent": true, // deleted within the retention
		"ses-old":                                true, // not a sandbox's
		"sandbox;x":                              true, // past the prefix
	}
	for s := range streams {
		at := old
		if s == store.SandboxStreamPrefix+"sbx-recent" {
			at = recent
		}
		appendAt(s, at)
	}
	// An empty stream of a gone sandbox (a lease taken, nothing written).
	if _, err := st.AcquireLease(ctx, store.SandboxStreamPrefix+"sbx-empty", "r", time.Minute); err != nil {
		t.Fatal(err)
	}
	streams[store.SandboxStreamPrefix+"sbx-empty"] = false

	cut := time.Now().Add(-time.Hour)
	n, err := st.DeleteSandboxStreamsBefore(ctx, cut, 2)
	if err != nil || n != 2 {
		t.Fatalf("first pass deleted %d, %v; want 2 (its limit)", n, err)
	}
	n, err = st.DeleteSandboxStreamsBefore(ctx, cut, 0)
	if err != nil || n != 1 {
		t.Fatalf("second pass deleted %d, %v; want the last 1", n, err)
	}
	for s, kept := range streams {
		head, err := st.StreamHead(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		entries, err := st.ReadStream(ctx, s, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if kept && (head != 2 || len(entries) != 2) {
			t.Errorf("stream %s: head %d, %d entries; want it kept", s, head, len(entries))
		}
		if !kept && (head != 0 || len(entries) != 0) {
			t.Errorf("stream %s: head %d, %d entries; want it gone", s, head, len(entries))
		}
	}
	if n, err := st.DeleteSandboxStreamsBefore(ctx, cut, 0); err != nil || n != 0 {
		t.Fatalf("a third pass deleted %d, %v", n, err)
	}
}
