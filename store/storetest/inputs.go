package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// acceptedEntry returns the input.accepted log entry of in.
func acceptedEntry(in *store.Input) store.LogEntry {
	payload, _ := json.Marshal(map[string]string{"content": in.Content})
	return store.LogEntry{Type: "input.accepted", TurnID: in.TurnID, InputID: in.ID,
		MessageID: in.ClientMessageID, Payload: payload, At: t0}
}

// mustAccept accepts in as a new input or fails t; it returns the input.
func mustAccept(t *testing.T, st store.Store, in *store.Input) *store.Input {
	t.Helper()
	got, dup, err := st.AcceptInput(t.Context(), in, acceptedEntry(in))
	if err != nil || dup {
		t.Fatalf("accept %s: duplicate %v, %v", in.ID, dup, err)
	}
	return got
}

// checkInput fails t unless got is want as read back from a store.
func checkInput(t *testing.T, got, want *store.Input) {
	t.Helper()
	if got.ID != want.ID || got.SessionID != want.SessionID || got.TurnID != want.TurnID ||
		got.ClientMessageID != want.ClientMessageID || got.Content != want.Content ||
		got.Seq != want.Seq || got.State != want.State || got.Error != want.Error ||
		!sameTime(got.CreatedAt, want.CreatedAt) || !sameTime(got.UpdatedAt, want.UpdatedAt) {
		t.Errorf("input = %+v\nwant %+v", *got, *want)
	}
}

func testAcceptInput(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateSession(t, st, newSession("s"))
	mustCreateSession(t, st, newSession("other"))
	first := &store.Input{ID: "in-1", SessionID: "s", TurnID: "t1", ClientMessageID: "m1",
		Content: "hello ✓", CreatedAt: t0, UpdatedAt: t0}
	got := mustAccept(t, st, first)
	if got.Seq != 1 || got.State != store.InputAccepted || first.Seq != 1 {
		t.Errorf("accepted input: seq %d (in: %d) state %q; want 1, %q", got.Seq, first.Seq, got.State, store.InputAccepted)
	}
	stored, err := st.GetInput(ctx, "in-1")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	checkInput(t, stored, first)
	want := acceptedEntry(first)
	want.Seq = 1
	checkStream(t, st, "s", []store.LogEntry{want})

	// An entry appended by other means takes a seq between inputs.
	if _, err := st.Append(ctx, "s", 0, []store.LogEntry{{Type: "note", At: t0}}); err != nil {
		t.Fatalf("append: %v", err)
	}
	tests := []struct {
		name    string
		in      store.Input
		dup     bool
		wantID  string
		wantSeq int64
		head    int64 // of stream "s" afterwards
	}{
		{"same client message", store.Input{ID: "in-dup", SessionID: "s", ClientMessageID: "m1", Content: "again"}, true, "in-1", 1, 2},
		{"no client message", store.Input{ID: "in-2", SessionID: "s", Content: "x"}, false, "in-2", 3, 3},
		{"no client message again", store.Input{ID: "in-3", SessionID: "s", Content: "x"}, false, "in-3", 4, 4},
		{"other client message", store.Input{ID: "in-4", SessionID: "s", ClientMessageID: "m2"}, false, "in-4", 5, 5},
		{"same client message, other session", store.Input{ID: "in-5", SessionID: "other", ClientMessageID: "m1"}, false, "in-5", 1, 5},
		{"same client message, last", store.Input{ID: "in-6", SessionID: "s", ClientMessageID: "m2"}, true, "in-4", 5, 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			got, dup, err := st.AcceptInput(ctx, &in, acceptedEntry(&in))
			if err != nil {
				t.Fatalf("accept: %v", err)
			}
			if dup != tc.dup || got.ID != tc.wantID || got.Seq != tc.wantSeq || got.State != store.InputAccepted {
				t.Errorf("accept = %s seq %d state %q duplicate %v; want %s seq %d, %v",
					got.ID, got.Seq, got.State, dup, tc.wantID, tc.wantSeq, tc.dup)
			}
			if head, err := st.StreamHead(ctx, "s"); err != nil || head != tc.head {
				t.Errorf("head = %d, %v; want %d", head, err, tc.head)
			}
			if tc.dup {
				_, err := st.GetInput(ctx, tc.in.ID)
				checkErr(t, "get the duplicate", err, store.ErrNotFound)
			}
		})
	}

	t.Run("unknown session", func(t *testing.T) {
		in := &store.Input{ID: "in-x", SessionID: "absent", ClientMessageID: "m1"}
		_, _, err := st.AcceptInput(ctx, in, acceptedEntry(in))
		checkErr(t, "accept", err, store.ErrNotFound)
		checkStream(t, st, "absent", nil)
		_, err = st.GetInput(ctx, "in-x")
		checkErr(t, "get", err, store.ErrNotFound)
	})

	t.Run("zero times", func(t *testing.T) {
		before := time.Now()
		got := mustAccept(t, st, &store.Input{ID: "in-now", SessionID: "s"})
		for _, tm := range []time.Time{got.CreatedAt, got.UpdatedAt} {
			if tm.Before(before.Add(-time.Second)) || tm.After(time.Now().Add(time.Second)) {
				t.Errorf("time of an input accepted without one = %v, want about now", tm)
			}
		}
	})
}

func testInputState(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateSession(t, st, newSession("s"))
	for _, id := range []string{"in-1", "in-2", "in-3"} {
		mustAccept(t, st, &store.Input{ID: id, SessionID: "s", TurnID: "t-" + id, Content: id, CreatedAt: t0, UpdatedAt: t0})
	}
	tests := []struct {
		name, id, state, errCode string
		from                     []string
		want                     error
	}{
		{"deliver", "in-1", store.InputDelivered, "", []string{store.InputAccepted}, nil},
		{"deliver again", "in-1", store.InputDelivered, "", []string{store.InputAccepted}, store.ErrConflict},
		{"consume from either", "in-1", store.InputConsumed, "", []string{store.InputAccepted, store.InputDelivered}, nil},
		{"fail from any state", "in-2", store.InputFailed, "SANDBOX_GONE", nil, nil},
		{"answer a failed one", "in-2", store.InputAnswered, "", []string{store.InputConsumed}, store.ErrConflict},
		{"absent", "absent", store.InputDelivered, "", nil, store.ErrNotFound},
		{"absent, with from", "absent", store.InputDelivered, "", []string{store.InputAccepted}, store.ErrNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := st.GetInput(ctx, tc.id)
			got, err := st.SetInputState(ctx, tc.id, tc.state, tc.errCode, tc.from...)
			checkErr(t, "set state", err, tc.want)
			after, _ := st.GetInput(ctx, tc.id)
			if tc.want != nil {
				if before != nil {
					checkInput(t, after, before)
				}
				return
			}
			if got.State != tc.state || got.Error != tc.errCode {
				t.Errorf("returned state %q error %q, want %q %q", got.State, got.Error, tc.state, tc.errCode)
			}
			if got.UpdatedAt.Before(time.Now().Add(-time.Minute)) {
				t.Errorf("UpdatedAt = %v, want about now", got.UpdatedAt)
			}
			checkInput(t, after, got)
			if got.Seq != before.Seq || got.Content != before.Content || !sameTime(got.CreatedAt, before.CreatedAt) {
				t.Errorf("set state changed more than the state: %+v, was %+v", *got, *before)
			}
		})
	}

	lists := []struct {
		name    string
		session string
		states  []string
		want    []string
	}{
		{"all", "s", nil, []string{"in-1", "in-2", "in-3"}},
		{"one state", "s", []string{store.InputAccepted}, []string{"in-3"}},
		{"two states", "s", []string{store.InputFailed, store.InputConsumed}, []string{"in-1", "in-2"}},
		{"no match", "s", []string{store.InputAnswered}, nil},
		{"unknown session", "absent", nil, nil},
	}
	for _, tc := range lists {
		t.Run("list "+tc.name, func(t *testing.T) {
			got, err := st.ListInputs(ctx, tc.session, tc.states...)
			if err != nil {
				t.Fatalf("list: %v", err)
			}
			var ids []string
			for _, in := range got {
				ids = append(ids, in.ID)
			}
			if !slices.Equal(ids, tc.want) {
				t.Errorf("listed %v, want %v", ids, tc.want)
			}
		})
	}
}

// testAcceptInputRace accepts one client message from many goroutines
// while others accept distinct ones: exactly one of the first is written,
// every other returns it, and the log has one entry per input, without gaps.
func testAcceptInputRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	mustCreateSession(t, st, newSession("s"))
	const n = 16
	type result struct {
		in  *store.Input
		dup bool
		err error
	}
	same, distinct := make([]result, n), make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			in := &store.Input{ID: fmt.Sprint("same-", i), SessionID: "s", ClientMessageID: "m", Content: fmt.Sprint(i)}
			got, dup, err := st.AcceptInput(ctx, in, acceptedEntry(in))
			same[i] = result{got, dup, err}
		})
		wg.Go(func() {
			in := &store.Input{ID: fmt.Sprint("distinct-", i), SessionID: "s", ClientMessageID: fmt.Sprint("m", i)}
			got, dup, err := st.AcceptInput(ctx, in, acceptedEntry(in))
			distinct[i] = result{got, dup, err}
		})
	}
	wg.Wait()
	var winners []string
	for i, r := range same {
		if r.err != nil {
			t.Fatalf("accept same %d: %v", i, r.err)
		}
		if !r.dup {
			winners = append(winners, r.in.ID)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("inputs written for one client message: %v, want one", winners)
	}
	for i, r := range same {
		if r.in.ID != winners[0] {
			t.Errorf("accept same %d returned %s, want %s", i, r.in.ID, winners[0])
		}
	}
	for i, r := range distinct {
		if r.err != nil || r.dup {
			t.Errorf("accept distinct %d: duplicate %v, %v", i, r.dup, r.err)
		}
	}
	ins, err := st.ListInputs(ctx, "s")
	if err != nil || len(ins) != n+1 {
		t.Fatalf("inputs = %d, %v; want %d", len(ins), err, n+1)
	}
	entries, err := st.ReadStream(ctx, "s", 0, 0)
	if err != nil || len(entries) != n+1 {
		t.Fatalf("log entries = %d, %v; want %d", len(entries), err, n+1)
	}
	for i, in := range ins {
		e := entries[i]
		if in.Seq != int64(i+1) || e.Seq != in.Seq || e.InputID != in.ID {
			t.Errorf("input %d: %s seq %d, entry seq %d of %s", i, in.ID, in.Seq, e.Seq, e.InputID)
		}
	}
}
