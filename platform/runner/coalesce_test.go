package runner

import (
	"testing"

	"github.com/astrabox/astrabox/platform/engine"
)

func TestCoalesce(t *testing.T) {
	ev := func(n int) []engine.Event { return make([]engine.Event, n) }
	tests := []struct {
		name       string
		queued     []batch
		wantEvents int
		wantSource int64
		wantLeft   int
	}{
		{"nothing waiting", nil, 1, 10, 0},
		{"merges what waits, keeping the last position", []batch{{ev(2), 20}, {ev(1), 0}, {ev(3), 30}}, 7, 30, 0},
		{"a batch without a position keeps the earlier one", []batch{{ev(1), 0}}, 2, 10, 0},
		{"bounded", []batch{{ev(maxCoalesce), 20}, {ev(1), 30}}, maxCoalesce + 1, 20, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ch := make(chan batch, len(tc.queued))
			for _, b := range tc.queued {
				ch <- b
			}
			got := coalesce(batch{ev(1), 10}, ch)
			if len(got.events) != tc.wantEvents || got.source != tc.wantSource || len(ch) != tc.wantLeft {
				t.Fatalf("got %d events at %d with %d left; want %d at %d with %d left", len(got.events), got.source, len(ch), tc.wantEvents, tc.wantSource, tc.wantLeft)
			}
		})
	}
}
