package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

// checkLease fails t unless got is held by holder with epoch, expiring
// about ttl after the call that returned it, which began at before.
func checkLease(t *testing.T, what string, got store.Lease, holder string, epoch int64, before time.Time, ttl time.Duration) {
	t.Helper()
	if got.Holder != holder || got.Epoch != epoch {
		t.Errorf("%s: lease %s epoch %d, want %s epoch %d", what, got.Holder, got.Epoch, holder, epoch)
	}
	// The database's clock: allow for a little skew.
	if lo, hi := before.Add(ttl-2*time.Second), time.Now().Add(ttl+2*time.Second); got.ExpiresAt.Before(lo) || got.ExpiresAt.After(hi) {
		t.Errorf("%s: lease expires at %v, want about %v", what, got.ExpiresAt, before.Add(ttl))
	}
}

// appendOne appends one entry of type typ to stream with epoch.
func appendOne(t *testing.T, st store.Store, stream string, epoch int64, typ string) error {
	t.Helper()
	_, err := st.Append(t.Context(), stream, epoch, []store.LogEntry{{Type: typ, At: t0}})
	return err
}

// testLeaseFencing hands a stream from one holder to another: the old
// holder's writes are refused from then on, and nothing of them is stored.
func testLeaseFencing(t *testing.T, st store.Store) {
	ctx := t.Context()
	if l, err := st.GetLease(ctx, "s"); err != nil || l != (store.Lease{}) {
		t.Fatalf("lease of an unknown stream = %+v, %v", l, err)
	}
	checkErr(t, "fenced append to an unknown stream", appendOne(t, st, "s", 1, "x"), store.ErrFenced)

	before := time.Now()
	l1, err := st.AcquireLease(ctx, "s", "h1", time.Minute)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	checkLease(t, "first lease", l1, "h1", 1, before, time.Minute)
	if got, err := st.GetLease(ctx, "s"); err != nil || got.Holder != "h1" || got.Epoch != 1 || !got.ExpiresAt.Equal(l1.ExpiresAt) {
		t.Errorf("get lease = %+v, %v; want %+v", got, err, l1)
	}
	steps := []struct {
		name  string
		epoch int64
		want  error
	}{
		{"holder's epoch", 1, nil},
		{"unfenced", 0, nil},
		{"a later epoch", 2, store.ErrFenced},
	}
	for _, s := range steps {
		checkErr(t, "append with "+s.name, appendOne(t, st, "s", s.epoch, s.name), s.want)
	}

	got, err := st.AcquireLease(ctx, "s", "h2", time.Minute)
	checkErr(t, "acquire a live lease", err, store.ErrConflict)
	if got.Holder != "h1" || got.Epoch != 1 {
		t.Errorf("acquire a live lease returned %+v, want h1's", got)
	}
	before = time.Now()
	again, err := st.AcquireLease(ctx, "s", "h1", 2*time.Minute)
	if err != nil {
		t.Fatalf("acquire again by the holder: %v", err)
	}
	checkLease(t, "acquired again by the holder", again, "h1", 1, before, 2*time.Minute)

	before = time.Now()
	renewed, err := st.RenewLease(ctx, "s", "h1", 1, 3*time.Minute)
	if err != nil {
		t.Fatalf("renew: %v", err)
	}
	checkLease(t, "renewed", renewed, "h1", 1, before, 3*time.Minute)
	for _, r := range []struct {
		holder string
		epoch  int64
	}{{"h2", 1}, {"h1", 2}, {"h1", 0}} {
		_, err := st.RenewLease(ctx, "s", r.holder, r.epoch, time.Minute)
		checkErr(t, fmt.Sprintf("renew by %s with epoch %d", r.holder, r.epoch), err, store.ErrFenced)
	}

	// Releasing someone else's lease does nothing; the holder's frees it.
	for _, r := range []struct {
		holder string
		epoch  int64
	}{{"h2", 1}, {"h1", 2}} {
		if err := st.ReleaseLease(ctx, "s", r.holder, r.epoch); err != nil {
			t.Fatalf("release by %s with epoch %d: %v", r.holder, r.epoch, err)
		}
		if got, err := st.GetLease(ctx, "s"); err != nil || got.Holder != "h1" {
			t.Errorf("lease after a release by %s with epoch %d = %+v, %v; want h1's", r.holder, r.epoch, got, err)
		}
	}
	if err := st.ReleaseLease(ctx, "s", "h1", 1); err != nil {
		t.Fatalf("release: %v", err)
	}
	if got, err := st.GetLease(ctx, "s"); err != nil || got != (store.Lease{}) {
		t.Errorf("lease after release = %+v, %v; want none", got, err)
	}
	_, err = st.RenewLease(ctx, "s", "h1", 1, time.Minute)
	checkErr(t, "renew a released lease", err, store.ErrFenced)

	before = time.Now()
	l2, err := st.AcquireLease(ctx, "s", "h2", time.Minute)
	if err != nil {
		t.Fatalf("acquire a released lease: %v", err)
	}
	checkLease(t, "second holder's lease", l2, "h2", 2, before, time.Minute)
	head, _ := st.StreamHead(ctx, "s")
	checkErr(t, "append by the old holder", appendOne(t, st, "s", 1, "stale"), store.ErrFenced)
	if now, _ := st.StreamHead(ctx, "s"); now != head {
		t.Errorf("a fenced append moved the head from %d to %d", head, now)
	}
	if err := appendOne(t, st, "s", 2, "new holder"); err != nil {
		t.Errorf("append by the new holder: %v", err)
	}
	entries, err := st.ReadStream(ctx, "s", 0, 0)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	var types []string
	for _, e := range entries {
		types = append(types, e.Type)
	}
	if want := fmt.Sprint([]string{"holder's epoch", "unfenced", "new holder"}); fmt.Sprint(types) != want {
		t.Errorf("stored %v, want %v", types, want)
	}
}

// testLeaseExpiry lets leases expire: another holder then takes over with
// a higher epoch, and the expired holder can neither renew nor append.
func testLeaseExpiry(t *testing.T, st store.Store) {
	ctx := t.Context()
	const ttl = 300 * time.Millisecond
	l1, err := st.AcquireLease(ctx, "s", "h1", ttl)
	if err != nil {
		t.Fatalf("acquire: %v", err)
	}
	_, err = st.AcquireLease(ctx, "s", "h2", time.Minute)
	checkErr(t, "acquire before expiry", err, store.ErrConflict)

	time.Sleep(ttl + 200*time.Millisecond)
	_, err = st.RenewLease(ctx, "s", "h1", l1.Epoch, time.Minute)
	checkErr(t, "renew an expired lease", err, store.ErrFenced)
	if got, err := st.GetLease(ctx, "s"); err != nil || got.Holder != "h1" || !got.ExpiresAt.Before(time.Now().Add(time.Second)) {
		t.Errorf("expired lease = %+v, %v; want h1's, expired", got, err)
	}
	before := time.Now()
	l2, err := st.AcquireLease(ctx, "s", "h2", ttl)
	if err != nil {
		t.Fatalf("acquire an expired lease: %v", err)
	}
	checkLease(t, "lease after expiry", l2, "h2", l1.Epoch+1, before, ttl)
	checkErr(t, "append by the expired holder", appendOne(t, st, "s", l1.Epoch, "stale"), store.ErrFenced)

	// The holder whose own lease expired gets a new epoch too: another may
	// have held it in between.
	time.Sleep(ttl + 200*time.Millisecond)
	l3, err := st.AcquireLease(ctx, "s", "h2", time.Minute)
	if err != nil {
		t.Fatalf("acquire again after expiry: %v", err)
	}
	if l3.Epoch != l2.Epoch+1 {
		t.Errorf("epoch after the holder's own lease expired = %d, want %d", l3.Epoch, l2.Epoch+1)
	}
	checkErr(t, "append with the expired epoch", appendOne(t, st, "s", l2.Epoch, "stale"), store.ErrFenced)
	if err := appendOne(t, st, "s", l3.Epoch, "fresh"); err != nil {
		t.Errorf("append with the new epoch: %v", err)
	}
}

// testLeaseRace acquires one free lease from many holders at once: exactly
// one gets it, the others are told who has it.
func testLeaseRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	const n = 12
	leases := make([]store.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { leases[i], errs[i] = st.AcquireLease(ctx, "s", fmt.Sprint("h", i), time.Minute) })
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("holders %d and %d both acquired the lease", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("acquire %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("nobody acquired the lease")
	}
	for i, l := range leases {
		if l.Holder != fmt.Sprint("h", won) || l.Epoch != 1 {
			t.Errorf("acquire %d returned %+v, want h%d's with epoch 1", i, l, won)
		}
	}
}
