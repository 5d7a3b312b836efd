package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// interposedStore runs once before the first UpdateSandbox, so that another
// writer changes the record between this writer's read and its write.
type interposedStore struct {
	store.Store
	once   sync.Once
	before func()
}

func (s *interposedStore) UpdateSandbox(ctx context.Context, rec *store.Sandbox) error {
	s.once.Do(s.before)
	return s.Store.UpdateSandbox(ctx, rec)
}

// pausable offers Pause and Resume over another provider; during runs
// inside them, while the record says Pausing or Resuming.
type pausable struct {
	sandbox.Provider
	during func()
}

func (p pausable) Capabilities() sandbox.Capabilities {
	c := p.Provider.Capabilities()
	c.Pause = true
	return c
}

func (p pausable) Pause(ctx context.Context, id string) error {
	if p.during != nil {
		p.during()
	}
	return nil
}

func (p pausable) Resume(ctx context.Context, id string) error { return p.Pause(ctx, id) }

// runningRecord stores a Running record expiring in an hour.
func runningRecord(t *testing.T, st store.Store, id string) *store.Sandbox {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	exp := now.Add(time.Hour)
	rec := &store.Sandbox{ID: id, Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, LastActiveAt: now, ExpiresAt: &exp}
	if err := st.CreateSandbox(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestReplicasKeepEachOthersChanges makes replica B's change land between
// replica A's read and write of one record (or, for transitions, while A's
// backend operation runs): both changes must be in the final record.
func TestReplicasKeepEachOthersChanges(t *testing.T) {
	ctx := context.Background()
	renewTo := time.Now().UTC().Add(3 * time.Hour).Truncate(time.Microsecond)
	v := "b"
	tests := []struct {
		name string
		// a is the interrupted change (on replica A), b the one that
		// lands meanwhile (on replica B).
		a, b  func(a, b *Service, id string) error
		check func(t *testing.T, got *store.Sandbox)
		// during: b runs inside A's backend operation instead of between
		// A's read and write.
		during bool
		aCode  sandbox.Code // A's expected error code; "" for success
	}{
		{
			name: "mark failed, renew meanwhile",
			a:    func(a, b *Service, id string) error { a.markFailed(ctx, id, "box_lost"); return nil },
			b:    func(a, b *Service, id string) error { _, err := b.Renew(ctx, id, renewTo); return err },
			check: func(t *testing.T, got *store.Sandbox) {
				if got.State != sandbox.StateFailed || got.Reason != "box_lost" || !got.ExpiresAt.Equal(renewTo) {
					t.Fatalf("%s %q expires %v: want Failed box_lost expiring %v", got.State, got.Reason, got.ExpiresAt, renewTo)
				}
			},
		},
		{
			name: "renew, patch metadata meanwhile",
			a:    func(a, b *Service, id string) error { _, err := a.Renew(ctx, id, renewTo); return err },
			b: func(a, b *Service, id string) error {
				_, err := b.PatchMetadata(ctx, id, map[string]*string{"by": &v})
				return err
			},
			check: func(t *testing.T, got *store.Sandbox) {
				if !got.ExpiresAt.Equal(renewTo) || got.Metadata["by"] != "b" {
					t.Fatalf("expires %v metadata %v: want %v and by=b", got.ExpiresAt, got.Metadata, renewTo)
				}
			},
		},
		{
			name: "patch metadata, mark failed meanwhile",
			a: func(a, b *Service, id string) error {
				_, err := a.PatchMetadata(ctx, id, map[string]*string{"by": &v})
				return err
			},
			b: func(a, b *Service, id string) error { b.markFailed(ctx, id, "box_lost"); return nil },
			check: func(t *testing.T, got *store.Sandbox) {
				if got.State != sandbox.StateFailed || got.Metadata["by"] != "b" {
					t.Fatalf("%s metadata %v: want Failed and by=b", got.State, got.Metadata)
				}
			},
		},
		{
			name:   "pause, renew while the backend pauses",
			during: true,
			a:      func(a, b *Service, id string) error { _, err := a.Pause(ctx, id); return err },
			b:      func(a, b *Service, id string) error { _, err := b.Renew(ctx, id, renewTo); return err },
			check: func(t *testing.T, got *store.Sandbox) {
				if got.State != sandbox.StatePaused || !got.ExpiresAt.Equal(renewTo) {
					t.Fatalf("%s expires %v: want Paused expiring %v", got.State, got.ExpiresAt, renewTo)
				}
			},
		},
		{
			name:   "pause, marked failed while the backend pauses",
			during: true,
			a:      func(a, b *Service, id string) error { _, err := a.Pause(ctx, id); return err },
			b:      func(a, b *Service, id string) error { b.markFailed(ctx, id, "box_lost"); return nil },
			aCode:  sandbox.CodeConflict,
			check: func(t *testing.T, got *store.Sandbox) {
				if got.State != sandbox.StateFailed || got.Reason != "box_lost" {
					t.Fatalf("%s %q: a pause overwrote another replica's failure", got.State, got.Reason)
				}
			},
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b, st := replicas(t)
			id := fmt.Sprintf("race%d", i)
			runningRecord(t, st, id)
			var bErr error
			interlude := func() { bErr = tt.b(a, b, id) }
			if tt.during {
				a.cfg.Backends["process"] = pausable{Provider: a.cfg.Backends["process"], during: interlude}
			} else {
				a.cfg.Store = &interposedStore{Store: st, before: interlude}
			}
			err := tt.a(a, b, id)
			if got := sandbox.CodeOf(err); err != nil && got != tt.aCode || err == nil && tt.aCode != "" {
				t.Fatalf("replica A: %v, want code %q", err, tt.aCode)
			}
			must(t, bErr)
			got, err := st.GetSandbox(ctx, id)
			must(t, err)
			tt.check(t, got)
		})
	}
}

// TestReplicasRaceRenewAndFailure runs a renew on replica A at the same time
// as replica B marks the box Failed, many times: the record always ends
// Failed, and a renew that succeeded is never lost (one refused found the
// record Failed already).
func TestReplicasRaceRenewAndFailure(t *testing.T) {
	ctx := context.Background()
	a, b, st := replicas(t)
	for i := range 20 {
		id := fmt.Sprintf("both%d", i)
		runningRecord(t, st, id)
		at := time.Now().UTC().Add(2 * time.Hour).Truncate(time.Microsecond)
		var wg sync.WaitGroup
		var renewErr error
		wg.Go(func() { _, renewErr = a.Renew(ctx, id, at) })
		wg.Go(func() { b.markFailed(ctx, id, "box_lost") })
		wg.Wait()
		got, err := st.GetSandbox(ctx, id)
		must(t, err)
		if got.State != sandbox.StateFailed {
			t.Fatalf("%s: state %s, want Failed", id, got.State)
		}
		switch {
		case renewErr == nil && !got.ExpiresAt.Equal(at):
			t.Fatalf("%s: the renew succeeded but the record expires %v, not %v", id, got.ExpiresAt, at)
		case renewErr != nil && sandbox.CodeOf(renewErr) != sandbox.CodeConflict:
			t.Fatalf("%s: renew: %v", id, renewErr)
		}
	}
}

// TestReplicasPatchConcurrently patches distinct metadata keys of one record
// from two replicas at once: every key lands.
func TestReplicasPatchConcurrently(t *testing.T) {
	ctx := context.Background()
	a, b, st := replicas(t)
	runningRecord(t, st, "meta1")
	const perReplica = 8
	var wg sync.WaitGroup
	errs := make(chan error, 2*perReplica)
	for r, svc := range []*Service{a, b} {
		for i := range perReplica {
			wg.Go(func() {
				val := "x"
				_, err := svc.PatchMetadata(ctx, "meta1", map[string]*string{fmt.Sprintf("k%d-%d", r, i): &val})
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	got, err := st.GetSandbox(ctx, "meta1")
	must(t, err)
	if len(got.Metadata) != 2*perReplica {
		t.Fatalf("%d of %d keys landed: %v", len(got.Metadata), 2*perReplica, got.Metadata)
	}
}

// TestUpdateRefusals covers update's contract: a refusal writes nothing, a
// missing record is SANDBOX_NOT_FOUND, endless contention ends in CONFLICT.
func TestUpdateRefusals(t *testing.T) {
	ctx := context.Background()
	svc := newTestService(t, nil, 0)
	st := svc.cfg.Store
	rec := runningRecord(t, st, "u1")
	refusal := sandbox.Errorf(sandbox.CodeConflict, "no")
	tests := []struct {
		name    string
		id      string
		fn      func(*store.Sandbox) error
		code    sandbox.Code // "" for success
		version int64        // the stored version afterwards
	}{
		{"refused", "u1", func(*store.Sandbox) error { return refusal }, sandbox.CodeConflict, rec.Version},
		{"unchanged", "u1", func(*store.Sandbox) error { return errUnchanged }, "", rec.Version},
		{"written", "u1", func(c *store.Sandbox) error { c.Reason = "x"; return nil }, "", rec.Version + 1},
		{"missing", "nope", func(*store.Sandbox) error { return nil }, sandbox.CodeSandboxNotFound, rec.Version + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.update(ctx, tt.id, tt.fn)
			if got := sandbox.CodeOf(err); err != nil && got != tt.code || err == nil && tt.code != "" {
				t.Fatalf("%v, want code %q", err, tt.code)
			}
			cur, err := st.GetSandbox(ctx, "u1")
			must(t, err)
			if cur.Version != tt.version {
				t.Fatalf("version %d, want %d", cur.Version, tt.version)
			}
		})
	}
	t.Run("contended", func(t *testing.T) {
		// Every write finds the record changed by another writer.
		attempts := 0
		_, err := svc.update(ctx, "u1", func(c *store.Sandbox) error {
			attempts++
			other, err := st.GetSandbox(ctx, "u1")
			must(t, err)
			must(t, st.UpdateSandbox(ctx, other))
			return nil
		})
		if sandbox.CodeOf(err) != sandbox.CodeConflict || !errors.Is(err, store.ErrConflict) || attempts != updateAttempts {
			t.Fatalf("%v after %d attempts, want CONFLICT after %d", err, attempts, updateAttempts)
		}
	})
}
