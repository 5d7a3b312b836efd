package storetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// checkIdempotency fails t unless got is want as read back from a store.
func checkIdempotency(t *testing.T, what string, got, want store.Idempotency) {
	t.Helper()
	if got.Key != want.Key || got.RequestHash != want.RequestHash || got.Status != want.Status ||
		!bytes.Equal(got.Body, want.Body) || !sameTime(got.CreatedAt, want.CreatedAt) || got.Holder != want.Holder {
		t.Errorf("%s = %+v, want %+v", what, got, want)
	}
}

func testIdempotency(t *testing.T, st store.Store) {
	ctx := t.Context()
	first := store.Idempotency{Key: "create:k1", RequestHash: "h1", Status: 201, Body: []byte(`{"id":"box"}`), CreatedAt: t0}
	tests := []struct {
		name    string
		put     store.Idempotency
		want    store.Idempotency
		existed bool
	}{
		{"new key", first, first, false},
		{"same key, same request", first, first, true},
		{"same key, other request", store.Idempotency{Key: "create:k1", RequestHash: "h2", Status: 500, Body: []byte("other"), CreatedAt: at(time.Hour)}, first, true},
		{"other scope", store.Idempotency{Key: "renew:k1", RequestHash: "h1", Status: 200, CreatedAt: t0},
			store.Idempotency{Key: "renew:k1", RequestHash: "h1", Status: 200, CreatedAt: t0}, false},
		{"large body", store.Idempotency{Key: "create:big", RequestHash: "h", Status: 200, Body: blob(1 << 20), CreatedAt: t0},
			store.Idempotency{Key: "create:big", RequestHash: "h", Status: 200, Body: blob(1 << 20), CreatedAt: t0}, false},
		{"reserved", store.Idempotency{Key: "create:held", RequestHash: "h", CreatedAt: t0, Holder: "http://10.0.0.7:8080#b00t"},
			store.Idempotency{Key: "create:held", RequestHash: "h", CreatedAt: t0, Holder: "http://10.0.0.7:8080#b00t"}, false},
		{"reserved, read back", store.Idempotency{Key: "create:held", RequestHash: "h", CreatedAt: t0, Holder: "other"},
			store.Idempotency{Key: "create:held", RequestHash: "h", CreatedAt: t0, Holder: "http://10.0.0.7:8080#b00t"}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, existed, err := st.PutIdempotency(ctx, tc.put)
			if err != nil {
				t.Fatalf("put: %v", err)
			}
			if existed != tc.existed {
				t.Errorf("existed = %v, want %v", existed, tc.existed)
			}
			checkIdempotency(t, "stored record", got, tc.want)
		})
	}

	before := time.Now()
	got, existed, err := st.PutIdempotency(ctx, store.Idempotency{Key: "create:now", RequestHash: "h", Status: 201})
	if err != nil || existed {
		t.Fatalf("put without CreatedAt: existed %v, %v", existed, err)
	}
	if got.CreatedAt.Before(before.Add(-time.Second)) || got.CreatedAt.After(time.Now().Add(time.Second)) {
		t.Errorf("CreatedAt of a record put without one = %v, want about now", got.CreatedAt)
	}
	again, existed, err := st.PutIdempotency(ctx, store.Idempotency{Key: "create:now", RequestHash: "h2"})
	if err != nil || !existed {
		t.Fatalf("second put: existed %v, %v", existed, err)
	}
	checkIdempotency(t, "second put", again, got)
}

func testIdempotencyRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	const n = 16
	type result struct {
		rec     store.Idempotency
		existed bool
		err     error
	}
	results := make([]result, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rec := store.Idempotency{Key: "create:race", RequestHash: fmt.Sprint("h", i), Status: 200 + i, Body: fmt.Appendf(nil, "body %d", i), CreatedAt: t0}
			got, existed, err := st.PutIdempotency(ctx, rec)
			results[i] = result{got, existed, err}
		})
	}
	wg.Wait()
	winners := 0
	var winner store.Idempotency
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("put %d: %v", i, r.err)
		}
		if !r.existed {
			winners++
			winner = r.rec
		}
	}
	if winners != 1 {
		t.Fatalf("%d concurrent puts of one key stored their record, want 1", winners)
	}
	for i, r := range results {
		checkIdempotency(t, fmt.Sprint("record returned to put ", i), r.rec, winner)
	}
}

func testIdempotencyExpiry(t *testing.T, st store.Store) {
	ctx := t.Context()
	old := store.Idempotency{Key: "old", RequestHash: "h", Status: 200, CreatedAt: at(-2 * time.Hour)}
	edge := store.Idempotency{Key: "edge", RequestHash: "h", Status: 200, CreatedAt: at(-time.Hour)}
	fresh := store.Idempotency{Key: "fresh", RequestHash: "h", Status: 200, CreatedAt: t0}
	for _, rec := range []store.Idempotency{old, edge, fresh} {
		if _, _, err := st.PutIdempotency(ctx, rec); err != nil {
			t.Fatalf("put %s: %v", rec.Key, err)
		}
	}
	if err := st.DeleteIdempotencyBefore(ctx, at(-time.Hour)); err != nil {
		t.Fatalf("delete: %v", err)
	}
	tests := []struct {
		key  string
		kept bool
	}{
		{"old", false},
		{"edge", true}, // created exactly at the limit: not before it
		{"fresh", true},
	}
	for _, tc := range tests {
		got, existed, err := st.PutIdempotency(ctx, store.Idempotency{Key: tc.key, RequestHash: "new", Status: 409, CreatedAt: t0})
		if err != nil {
			t.Fatalf("put %s again: %v", tc.key, err)
		}
		if existed != tc.kept {
			t.Errorf("%s kept = %v, want %v", tc.key, existed, tc.kept)
		}
		if wantHash := map[bool]string{true: "h", false: "new"}[tc.kept]; got.RequestHash != wantHash {
			t.Errorf("%s RequestHash = %q, want %q", tc.key, got.RequestHash, wantHash)
		}
	}
	if err := st.DeleteIdempotencyBefore(ctx, at(time.Hour)); err != nil {
		t.Fatalf("delete all: %v", err)
	}
	if _, existed, err := st.PutIdempotency(ctx, fresh); err != nil || existed {
		t.Errorf("put after deleting all: existed %v, %v; want false, nil", existed, err)
	}
}

// testIdempotencyReserve walks the reserve-then-answer pattern: put with
// Status 0, then complete or delete.
func testIdempotencyReserve(t *testing.T, st store.Store) {
	ctx := t.Context()
	reserved := store.Idempotency{Key: "create:r", RequestHash: "h", CreatedAt: t0}
	if _, existed, err := st.PutIdempotency(ctx, reserved); err != nil || existed {
		t.Fatalf("reserve: existed %v, %v", existed, err)
	}
	answer := store.Idempotency{Key: "create:r", RequestHash: "h", Status: 201, Body: []byte(`{"id":"box"}`), CreatedAt: at(time.Hour)}
	tests := []struct {
		name string
		rec  store.Idempotency
		want error
	}{
		{"absent key", store.Idempotency{Key: "create:absent", RequestHash: "h", Status: 201}, store.ErrNotFound},
		{"other request", store.Idempotency{Key: "create:r", RequestHash: "other", Status: 500}, store.ErrConflict},
		{"answer", answer, nil},
		{"answer again", answer, nil},
	}
	for _, tc := range tests {
		checkErr(t, "complete "+tc.name, st.CompleteIdempotency(ctx, tc.rec), tc.want)
	}
	got, existed, err := st.PutIdempotency(ctx, store.Idempotency{Key: "create:r", RequestHash: "h"})
	if err != nil || !existed {
		t.Fatalf("put after complete: existed %v, %v", existed, err)
	}
	want := answer
	want.CreatedAt = t0 // the reservation's
	checkIdempotency(t, "completed record", got, want)

	if _, _, err := st.PutIdempotency(ctx, store.Idempotency{Key: "create:failed", RequestHash: "h", CreatedAt: t0}); err != nil {
		t.Fatalf("reserve: %v", err)
	}
	if err := st.DeleteIdempotency(ctx, "create:failed"); err != nil {
		t.Fatalf("delete reservation: %v", err)
	}
	checkErr(t, "delete again", st.DeleteIdempotency(ctx, "create:failed"), store.ErrNotFound)
	if _, existed, err := st.PutIdempotency(ctx, store.Idempotency{Key: "create:failed", RequestHash: "h2"}); err != nil || existed {
		t.Errorf("put after delete: existed %v, %v; want false, nil", existed, err)
	}
	if _, existed, err := st.PutIdempotency(ctx, reserved); err != nil || !existed {
		t.Errorf("deleting one key removed another: existed %v, %v", existed, err)
	}
}
