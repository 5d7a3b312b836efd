// State changes of a running sandbox: pause, resume, renew, metadata, activity.

package lifecycle

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Pause freezes a running sandbox.
func (s *Service) Pause(ctx context.Context, id string) (*store.Sandbox, error) {
	return s.transition(ctx, id, sandbox.StatePausing, sandbox.StatePaused, sandbox.Provider.Pause)
}

// Resume thaws a paused sandbox.
func (s *Service) Resume(ctx context.Context, id string) (*store.Sandbox, error) {
	return s.transition(ctx, id, sandbox.StateResuming, sandbox.StateRunning, sandbox.Provider.Resume)
}

// transition moves sandbox id through state via to state to with the
// backend operation op. The record is moved to via (if its current state
// allows) before op runs; afterwards to, or back to the state before via
// when op fails, but only if the record is still in via: a change another
// writer made meanwhile (a delete, a failure) is kept, and transition then
// answers CONFLICT. Changes of other fields (a renew) are always kept.
func (s *Service) transition(ctx context.Context, id string, via, to sandbox.State, op func(sandbox.Provider, context.Context, string) error) (*store.Sandbox, error) {
	unlock := s.lock(id)
	defer unlock()
	var (
		p    sandbox.Provider
		prev sandbox.State
	)
	if _, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		var ok bool
		if p, ok = s.cfg.Backends[cur.Backend]; !ok {
			return sandbox.Errorf(sandbox.CodeBackendDisabled, "sandbox %s lives on backend %q, which is not enabled", id, cur.Backend)
		}
		if !p.Capabilities().Pause {
			return sandbox.Errorf(sandbox.CodeCapability, "capability pause is not supported by backend %s", cur.Backend)
		}
		if err := cur.State.CheckTransition(via); err != nil {
			return err
		}
		prev = cur.State
		cur.State, cur.Reason = via, ""
		return nil
	}); err != nil {
		return nil, err
	}
	if err := op(p, context.WithoutCancel(ctx), id); err != nil {
		failed := "transition_failed: " + sandbox.MessageOf(err)
		if _, uerr := s.update(context.WithoutCancel(ctx), id, func(cur *store.Sandbox) error {
			if cur.State != via {
				return errUnchanged // another writer moved on meanwhile
			}
			cur.State, cur.Reason = prev, failed
			return nil
		}); uerr != nil {
			s.log.Warn("record failed transition", "sandbox_id", id, "to", to, "err", uerr)
		}
		return nil, fmt.Errorf("%s sandbox %s: %w", strings.ToLower(string(via)), id, err)
	}
	rec, err := s.update(context.WithoutCancel(ctx), id, func(cur *store.Sandbox) error {
		if cur.State != via {
			return sandbox.Errorf(sandbox.CodeConflict, "sandbox %s became %s while %s", id, cur.State, strings.ToLower(string(via)))
		}
		cur.State = to
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Renew moves a sandbox's expiry to at, which must be in the future and
// later than the current expiry: the expiry of the record as stored when
// it is written, so concurrent renews never move an expiry back.
func (s *Service) Renew(ctx context.Context, id string, at time.Time) (*store.Sandbox, error) {
	unlock := s.lock(id)
	defer unlock()
	now := s.now()
	t := at.UTC().Truncate(time.Microsecond)
	rec, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		if !at.After(now) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "expiresAt %s is not in the future", at.UTC().Format(time.RFC3339))
		}
		if cur.ExpiresAt != nil && !at.After(*cur.ExpiresAt) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "expiresAt %s is not after the current expiry %s", at.UTC().Format(time.RFC3339), cur.ExpiresAt.Format(time.RFC3339))
		}
		if max := s.cfg.Limits.Timeout(); at.Sub(now) > max {
			return sandbox.Errorf(sandbox.CodeLimitOutOfRange, "expiresAt %s is more than the server's maximum %ds away", at.UTC().Format(time.RFC3339), int64(max/time.Second))
		}
		if cur.State.Terminal() {
			return sandbox.Errorf(sandbox.CodeConflict, "sandbox %s is %s", id, cur.State)
		}
		if err := s.forwardRenew(ctx, cur, t); err != nil {
			return err
		}
		cur.ExpiresAt = &t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// PatchMetadata sets (or, for null values, removes) metadata keys.
// Keys the patch does not name keep their stored values, also when another
// writer set them meanwhile. A patch that sets a key must leave a record
// that passes ValidateMetadata (entries, count, total size); otherwise
// nothing is written and the error is INVALID_REQUEST_BODY. A patch that
// only removes keys is always applied (it can only shrink a record).
func (s *Service) PatchMetadata(ctx context.Context, id string, patch map[string]*string) (*store.Sandbox, error) {
	sets := false
	for k, v := range patch {
		if v != nil {
			if err := ValidateMetadataEntry(k, *v); err != nil {
				return nil, err
			}
			sets = true
		}
	}
	unlock := s.lock(id)
	defer unlock()
	rec, err := s.update(ctx, id, func(cur *store.Sandbox) error {
		if cur.Metadata == nil {
			cur.Metadata = map[string]string{}
		}
		for k, v := range patch {
			if v == nil {
				delete(cur.Metadata, k)
			} else {
				cur.Metadata[k] = *v
			}
		}
		if !sets {
			return nil
		}
		return ValidateMetadata(cur.Metadata)
	})
	if err != nil {
		return nil, err
	}
	return rec, nil
}

// Touch records activity on a sandbox (API or proxy use), for its idle
// timeout. It is cheap to call often: it writes at most every few seconds.
func (s *Service) Touch(ctx context.Context, rec *store.Sandbox) {
	if rec.IdleTimeout <= 0 || s.now().Sub(rec.LastActiveAt) < 5*time.Second {
		return
	}
	unlock := s.lock(rec.ID)
	defer unlock()
	cur, _, err := s.write(ctx, rec.ID, func(cur *store.Sandbox) error {
		if s.now().Sub(cur.LastActiveAt) < 5*time.Second {
			return errUnchanged // touched meanwhile (by another replica)
		}
		cur.LastActiveAt = s.stamp()
		return nil
	})
	if err == nil {
		*rec = *cur // as written, or as another replica's touch left it
	}
}
