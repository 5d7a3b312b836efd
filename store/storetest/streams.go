package storetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// checkEntries fails t unless got equals want (Seqs set) as read back.
func checkEntries(t *testing.T, got, want []store.LogEntry) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d entries, want %d", len(got), len(want))
	}
	for i, g := range got {
		w := want[i]
		if g.Seq != w.Seq || g.Type != w.Type || g.TurnID != w.TurnID || g.InputID != w.InputID ||
			g.MessageID != w.MessageID || !bytes.Equal(g.Payload, w.Payload) || g.Source != w.Source ||
			!sameTime(g.At, w.At) {
			t.Errorf("entry %d = %+v (payload %.40q), want %+v (payload %.40q)", i, g, g.Payload, w, w.Payload)
		}
	}
}

// checkStream fails t unless stream holds exactly want, and its head is
// the last seq of want.
func checkStream(t *testing.T, st store.Store, stream string, want []store.LogEntry) {
	t.Helper()
	got, err := st.ReadStream(t.Context(), stream, 0, 0)
	if err != nil {
		t.Fatalf("read %s: %v", stream, err)
	}
	checkEntries(t, got, want)
	var last int64
	if len(want) > 0 {
		last = want[len(want)-1].Seq
	}
	if head, err := st.StreamHead(t.Context(), stream); err != nil || head != last {
		t.Errorf("head of %s = %d, %v; want %d", stream, head, err, last)
	}
}

func testStreamAppend(t *testing.T, st store.Store) {
	ctx := t.Context()
	checkStream(t, st, "s", nil)
	if src, err := st.LastSource(ctx, "s"); err != nil || src != 0 {
		t.Errorf("last source of an unknown stream = %d, %v", src, err)
	}
	batches := [][]store.LogEntry{
		{{Type: "turn.started", TurnID: "t1", At: t0}},
		{
			{Type: "message", TurnID: "t1", MessageID: "m1", Payload: json.RawMessage(`{"text": "hi",  "z":[1]}`), Source: 10, At: at(time.Second)},
			{Type: "tool", TurnID: "t1", InputID: "in-1", Payload: json.RawMessage(`null`), Source: 25, At: at(2 * time.Second)},
			{Type: "message", TurnID: "t1", MessageID: "m2", Payload: json.RawMessage(`{"text":"✓ ünï"}`), Source: 20, At: at(3 * time.Second)},
		},
		{{Type: "large", Payload: json.RawMessage(fmt.Sprintf(`{"b":%q}`, bytes.Repeat([]byte("y"), 1<<20))), At: t0}},
		{{Type: "turn.ended", TurnID: "t1", At: at(4 * time.Second)}},
	}
	var all []store.LogEntry
	for i, b := range batches {
		first, err := st.Append(ctx, "s", 0, b)
		if err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
		if want := int64(len(all) + 1); first != want {
			t.Errorf("append %d: first seq %d, want %d", i, first, want)
		}
		for j, e := range b {
			e.Seq = first + int64(j)
			all = append(all, e)
		}
	}
	checkStream(t, st, "s", all)
	if src, err := st.LastSource(ctx, "s"); err != nil || src != 25 {
		t.Errorf("last source = %d, %v; want the largest, 25", src, err)
	}

	reads := []struct {
		name            string
		afterSeq, limit int64
		want            []store.LogEntry
	}{
		{"all", 0, 0, all},
		{"negative after and limit", -1, -1, all},
		{"first two", 0, 2, all[:2]},
		{"a middle page", 2, 2, all[2:4]},
		{"the rest", 4, 0, all[4:]},
		{"past the end", 4, 100, all[4:]},
		{"after the last", int64(len(all)), 0, nil},
	}
	for _, tc := range reads {
		t.Run(tc.name, func(t *testing.T) {
			got, err := st.ReadStream(ctx, "s", tc.afterSeq, tc.limit)
			if err != nil {
				t.Fatalf("read: %v", err)
			}
			checkEntries(t, got, tc.want)
		})
	}

	// Streams are apart; a zero At is the time of the append.
	before := time.Now()
	if first, err := st.Append(ctx, "other", 0, []store.LogEntry{{Type: "x"}}); err != nil || first != 1 {
		t.Fatalf("append to another stream: first %d, %v; want 1", first, err)
	}
	got, err := st.ReadStream(ctx, "other", 0, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("read other: %v, %v", got, err)
	}
	if got[0].At.Before(before.Add(-time.Second)) || got[0].At.After(time.Now().Add(time.Second)) {
		t.Errorf("At of an entry appended without one = %v, want about now", got[0].At)
	}
	checkStream(t, st, "s", all)
}

// testStreamConcurrentAppend appends batches of 1 to 3 entries from many
// goroutines, fenced and not, while a follower reads on from the last seq
// it saw: the seqs are exactly 1..N, each batch's consecutive and in its
// order, and the follower misses nothing.
func testStreamConcurrentAppend(t *testing.T, st store.Store) {
	ctx := t.Context()
	lease, err := st.AcquireLease(ctx, "s", "runner", time.Hour)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	const workers, each = 8, 50
	type batch struct {
		first int64
		ids   []string
	}
	batches := make([][]batch, workers)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			epoch := int64(0)
			if w%2 == 1 {
				epoch = lease.Epoch
			}
			for i := range each {
				var b batch
				var entries []store.LogEntry
				for j := range 1 + (w+i)%3 {
					id := fmt.Sprintf("w%d-%d-%d", w, i, j)
					b.ids = append(b.ids, id)
					entries = append(entries, store.LogEntry{Type: "x", MessageID: id, Source: int64(i), At: t0})
				}
				first, err := st.Append(ctx, "s", epoch, entries)
				if err != nil {
					errs <- fmt.Errorf("worker %d: %w", w, err)
					return
				}
				b.first = first
				batches[w] = append(batches[w], b)
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()

	var seen []store.LogEntry
	deadline := time.Now().Add(2 * time.Minute)
	for finished := false; ; {
		got, err := st.ReadStream(ctx, "s", int64(len(seen)), 0)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		for _, e := range got {
			if e.Seq != int64(len(seen)+1) {
				t.Fatalf("follower read seq %d after %d", e.Seq, len(seen))
			}
			seen = append(seen, e)
		}
		if finished { // this read began after every append had returned
			break
		}
		select {
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

	bySeq := map[int64]string{}
	n := 0
	for w := range workers {
		for _, b := range batches[w] {
			for j, id := range b.ids {
				bySeq[b.first+int64(j)] = id
				n++
			}
		}
	}
	if len(seen) != n || len(bySeq) != n {
		t.Fatalf("follower saw %d entries, appends returned %d distinct seqs; want %d", len(seen), len(bySeq), n)
	}
	for _, e := range seen {
		if bySeq[e.Seq] != e.MessageID {
			t.Errorf("seq %d holds %s, want %s", e.Seq, e.MessageID, bySeq[e.Seq])
		}
	}
	if head, err := st.StreamHead(ctx, "s"); err != nil || head != int64(n) {
		t.Errorf("head = %d, %v; want %d", head, err, n)
	}
	if src, err := st.LastSource(ctx, "s"); err != nil || src != each-1 {
		t.Errorf("last source = %d, %v; want %d", src, err, each-1)
	}
}

// testStreamEntryOfType finds entries of one type before and after a seq,
// in one stream only.
func testStreamEntryOfType(t *testing.T, st store.Store) {
	ctx := t.Context()
	entries := []store.LogEntry{
		{Type: "open", TurnID: "t1", At: t0},                                              // 1
		{Type: "part", TurnID: "t1", Payload: json.RawMessage(`{"n":1}`), At: t0},         // 2
		{Type: "close", TurnID: "t1", At: t0},                                             // 3
		{Type: "open", TurnID: "t2", InputID: "in-2", MessageID: "m2", Source: 4, At: t0}, // 4
		{Type: "part", TurnID: "t2", At: t0},                                              // 5
	}
	if _, err := st.Append(ctx, "s", 0, entries); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Append(ctx, "other", 0, []store.LogEntry{{Type: "close", TurnID: "x", At: t0}}); err != nil {
		t.Fatal(err)
	}
	want := func(i int) store.LogEntry { e := entries[i-1]; e.Seq = int64(i); return e }
	tests := []struct {
		name   string
		find   func() (store.LogEntry, bool, error)
		wantAt int // 0: none
	}{
		{"last open at or before 5", func() (store.LogEntry, bool, error) { return st.LastOfType(ctx, "s", "open", 5) }, 4},
		{"last open at or before 4 (at)", func() (store.LogEntry, bool, error) { return st.LastOfType(ctx, "s", "open", 4) }, 4},
		{"last open at or before 3", func() (store.LogEntry, bool, error) { return st.LastOfType(ctx, "s", "open", 3) }, 1},
		{"last open at or before 0", func() (store.LogEntry, bool, error) { return st.LastOfType(ctx, "s", "open", 0) }, 0},
		{"next close after 0", func() (store.LogEntry, bool, error) { return st.NextOfType(ctx, "s", "close", 0) }, 3},
		{"next close after 3 (not at)", func() (store.LogEntry, bool, error) { return st.NextOfType(ctx, "s", "close", 3) }, 0},
		{"next open after 1", func() (store.LogEntry, bool, error) { return st.NextOfType(ctx, "s", "open", 1) }, 4},
		{"a type the stream lacks", func() (store.LogEntry, bool, error) { return st.NextOfType(ctx, "s", "nothing", 0) }, 0},
		{"an unknown stream", func() (store.LogEntry, bool, error) { return st.LastOfType(ctx, "none", "open", 100) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := tt.find()
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantAt == 0 {
				if ok {
					t.Fatalf("found %+v, want none", got)
				}
				return
			}
			if !ok {
				t.Fatalf("none, want entry %d", tt.wantAt)
			}
			checkEntries(t, []store.LogEntry{got}, []store.LogEntry{want(tt.wantAt)})
		})
	}
}
