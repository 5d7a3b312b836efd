package postgres_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
)

// TestIdleTransactionReleasesLease: a replica that stops between two
// statements of a transaction holding a stream's row lock (here: the
// fenced update of an Append, never committed, as a holder frozen or cut
// off mid-Append leaves it) does not keep the next holder from taking the
// lease once it expired: the database ends the idle transaction, the
// acquisition goes through with a higher epoch, and the stale
// transaction's commit is refused.
func TestIdleTransactionReleasesLease(t *testing.T) {
	dsn := freshDatabase(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	held, err := a.AcquireLease(ctx, "s", "a", 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := a.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `UPDATE streams SET next_seq = next_seq + 1 WHERE id = 's' AND lease_epoch = $1`, held.Epoch); err != nil {
		t.Fatal(err)
	}
	// The lease expires while the transaction sits idle with the row
	// locked; b's acquisition waits for the lock, then takes the lease.
	for {
		l, err := b.GetLease(ctx, "s")
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(l.ExpiresAt) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	got, err := b.AcquireLease(ctx, "s", "b", time.Minute)
	if err != nil {
		t.Fatalf("acquire after the holder stopped mid-transaction: %v", err)
	}
	if got.Holder != "b" || got.Epoch <= held.Epoch {
		t.Fatalf("lease %+v after %+v", got, held)
	}
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("the stale transaction committed after the database should have ended it")
	}
	if _, err := a.Append(ctx, "s", held.Epoch, []store.LogEntry{{Type: "late"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("late append with the old epoch: %v, want ErrFenced", err)
	}
	if head, err := b.StreamHead(ctx, "s"); err != nil || head != 0 {
		t.Fatalf("stream head %d (%v), want 0: nothing of the stale holder's landed", head, err)
	}
}
