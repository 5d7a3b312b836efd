package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Conditional updates. Several replicas may change one sandbox record at
// once (a renew through replica A while replica B's reconciler marks the
// box Failed), and the per-process lock (Service.lock) only orders the
// changes of one process. Every change of a record is therefore a function
// applied to the record as currently stored and written with an update
// conditional on the version it read (store.Sandboxes.UpdateSandbox); when
// another writer got there first the record is read again and the function
// applied again, so no change overwrites another's.

// updateAttempts bounds how often update reads and writes again a record
// that keeps changing under it.
const updateAttempts = 10

// errUnchanged, returned by an update function, says the stored record is
// already as wanted: update writes nothing and returns it without error.
var errUnchanged = errors.New("record unchanged")

// update applies fn to the current record id and writes the result
// conditionally on the version read, retrying with a freshly read record
// on store.ErrConflict, and emits the written record's state.
//
// fn must derive its change from the record it is given (it may be called
// several times, each time with a fresh copy) and may refuse with an error,
// which update returns as is and without writing; errUnchanged refuses
// without an error. A missing record is SANDBOX_NOT_FOUND; a record that
// stays contended for updateAttempts attempts is CONFLICT. It returns the
// record as stored (its new Version), or as last read when fn refused.
func (s *Service) update(ctx context.Context, id string, fn func(*store.Sandbox) error) (*store.Sandbox, error) {
	rec, wrote, err := s.write(ctx, id, fn)
	if wrote {
		s.emit(ctx, rec)
	}
	return rec, err
}

// write is update without the event: for changes that are no state
// transition (activity stamps).
func (s *Service) write(ctx context.Context, id string, fn func(*store.Sandbox) error) (rec *store.Sandbox, wrote bool, err error) {
	for attempt := range updateAttempts {
		if attempt > 1 {
			if err := backoff(ctx, attempt); err != nil {
				return nil, false, fmt.Errorf("update sandbox %s: %w", id, err)
			}
		}
		cur, err := s.cfg.Store.GetSandbox(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return nil, false, notFound(id, err)
		}
		if err != nil {
			return nil, false, fmt.Errorf("read sandbox %s: %w", id, err)
		}
		if err := fn(cur); err != nil {
			if errors.Is(err, errUnchanged) {
				return cur, false, nil
			}
			return cur, false, err
		}
		cur.UpdatedAt = s.stamp()
		err = s.cfg.Store.UpdateSandbox(ctx, cur)
		switch {
		case err == nil:
			return cur, true, nil
		case errors.Is(err, store.ErrConflict):
			continue // changed since read: apply fn to the new version
		case errors.Is(err, store.ErrNotFound):
			return nil, false, notFound(id, err)
		}
		return nil, false, fmt.Errorf("save sandbox %s: %w", id, err)
	}
	return nil, false, &sandbox.Error{Code: sandbox.CodeConflict,
		Message: fmt.Sprintf("sandbox %s is being changed concurrently; try again", id),
		Err:     fmt.Errorf("update sandbox %s: %d attempts: %w", id, updateAttempts, store.ErrConflict)}
}

// notFound is the error of a sandbox record that does not exist (any
// more); it wraps the store's cause.
func notFound(id string, cause error) error {
	return &sandbox.Error{Code: sandbox.CodeSandboxNotFound, Message: fmt.Sprintf("sandbox %q not found", id), Err: cause}
}

// backoff waits a short random time, growing with attempt, so that writers
// contending for one record spread out; it returns ctx's error if ctx ends
// first.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(attempt)*int64(2*time.Millisecond))) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
