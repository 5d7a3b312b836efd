package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Warm pools. A profile with PoolSize n keeps n boxes created and Running
// on its backend, recorded in the store with the pool's key (store.Sandbox
// Pool) so that they survive a restart and stay out of users' lists and
// quota. A create whose planned box equals the pool's claims one in a
// single store update; the backend's reconciler refills the pool at once
// (kick) and on every pass, retires boxes of a changed profile and reaps
// dead ones like any other.

// claimAttempts bounds how many dead pool members a create skips before
// it starts a box of its own.
const claimAttempts = 3

// poolKey names the boxes interchangeable for one another: same profile,
// backend and everything that shapes a box (image, entrypoint, env,
// resources, network, workspace, runtime, volumes). Metadata and timeouts belong to the
// record and are set when a box is claimed; requested capabilities are
// only checked, never applied.
func poolKey(profile, backend string, spec sandbox.Spec) string {
	shape := struct {
		Backend    string
		Image      string
		Entrypoint []string
		Env        map[string]string // encoding/json sorts map keys
		Resources  sandbox.Resources
		Network    sandbox.NetworkPolicy
		Workspace  *sandbox.Workspace
		Runtime    string
		Volumes    []sandbox.Volume `json:",omitempty"` // pool boxes have none
	}{backend, spec.Image, spec.Entrypoint, spec.Env, spec.Resources, spec.Network, spec.Workspace, spec.Runtime, spec.Volumes}
	if len(shape.Env) == 0 {
		shape.Env = nil
	}
	if len(shape.Entrypoint) == 0 {
		shape.Entrypoint = nil
	}
	b, _ := json.Marshal(shape) // plain data: cannot fail
	sum := sha256.Sum256(b)
	return profile + "/" + hex.EncodeToString(sum[:8])
}

// claim takes a ready box of pool key and makes it the requested sandbox.
// It returns nil and no error when the pool has no live box.
func (s *Service) claim(ctx context.Context, key string, spec sandbox.Spec, specJSON []byte, owner Owner) (*store.Sandbox, error) {
	for range claimAttempts {
		rec, err := s.cfg.Store.ClaimPooled(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			s.pools.count(key, "miss")
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("claim pooled sandbox: %w", err)
		}
		s.kick(rec.Backend)
		if info, err := s.cfg.Backends[rec.Backend].Inspect(ctx, rec.ID); err != nil || info.State != sandbox.StateRunning {
			// Died since the last reconcile: it is a plain failed record now.
			s.log.Warn("pool: claimed box is not running; removing it", "sandbox_id", rec.ID, "pool", key, "err", err)
			s.markFailed(context.WithoutCancel(ctx), rec.ID, "pool_box_lost")
			continue
		}
		if err := s.adopt(ctx, rec, spec, specJSON, owner); err != nil {
			// Out of the pool but not the user's: it would hold resources
			// with no expiry.
			s.reap(context.WithoutCancel(ctx), rec.ID, "claim_failed")
			if errors.Is(err, errPoolBoxGone) {
				continue // failed or deleted since the claim: try another
			}
			return nil, err
		}
		s.pools.count(key, "hit")
		s.log.Info("sandbox claimed from pool", "sandbox_id", rec.ID, "backend", rec.Backend, "pool", key)
		return rec, nil
	}
	s.pools.count(key, "miss")
	return nil, nil
}

// errPoolBoxGone is adopt's refusal of a claimed record that is no longer
// Running (the reconciler found its box dead since the claim).
var errPoolBoxGone = errors.New("claimed pool box is no longer running")

// adopt turns a claimed pool record into the requested sandbox: the
// request's metadata, timeouts, spec and owner, created now; rec becomes the
// record as stored. A record that is no longer Running is refused with
// errPoolBoxGone.
func (s *Service) adopt(ctx context.Context, rec *store.Sandbox, spec sandbox.Spec, specJSON []byte, owner Owner) error {
	unlock := s.lock(rec.ID)
	defer unlock()
	now := s.stamp()
	cur, err := s.update(context.WithoutCancel(ctx), rec.ID, func(cur *store.Sandbox) error {
		if cur.State != sandbox.StateRunning || cur.Pool != "" {
			return fmt.Errorf("adopt sandbox %s (%s): %w", cur.ID, cur.State, errPoolBoxGone)
		}
		cur.Spec, cur.Metadata, cur.Entrypoint = specJSON, spec.Metadata, spec.Entrypoint
		cur.OwnerID, cur.OrgID = owner.UserID, owner.OrgID
		cur.CreatedAt, cur.LastActiveAt, cur.IdleTimeout, cur.ExpiresAt = now, now, spec.IdleTimeout, nil
		if spec.Timeout > 0 {
			exp := now.Add(spec.Timeout)
			cur.ExpiresAt = &exp
		}
		cur.Reason = "claimed_from_pool"
		return nil
	})
	if err != nil {
		return err
	}
	*rec = *cur
	// The box was made with the pool's expiry, from when it was made: a
	// backend that keeps its own (sandbox.Renewer) gets the new one.
	if cur.ExpiresAt != nil {
		if err := s.forwardRenew(ctx, cur, *cur.ExpiresAt); err != nil {
			return err
		}
	}
	return nil
}

// retire deletes a pool member that no pool wants any more, unless a
// claim took it since rec was read: it is first taken out of the pool by
// a conditional update that refuses once the record has left rec's pool
// (a claim empties its Pool) or stopped being Pending or Running.
func (s *Service) retire(ctx context.Context, rec *store.Sandbox) {
	unlock := s.lock(rec.ID)
	_, wrote, err := s.write(ctx, rec.ID, func(cur *store.Sandbox) error {
		if cur.Pool == "" || cur.Pool != rec.Pool || (cur.State != sandbox.StatePending && cur.State != sandbox.StateRunning) {
			return errUnchanged // claimed (or changed) meanwhile: not ours to delete
		}
		cur.Pool, cur.State, cur.Reason = "", sandbox.StateStopping, "pool_retired"
		return nil
	})
	unlock()
	if err != nil && sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		s.log.Warn("pool: retire member", "sandbox_id", rec.ID, "err", err)
	}
	if !wrote {
		return
	}
	s.reap(ctx, rec.ID, "pool_retired")
}

// kick asks backend's reconciler to refill its pools now.
func (s *Service) kick(backend string) {
	select {
	case s.kicks[backend] <- struct{}{}:
	default:
	}
}

// poolTarget is what one pool should hold.
type poolTarget struct {
	profile string
	size    int
	spec    sandbox.Spec
}

// poolTargets returns the pools of backend's profiles by key.
func (s *Service) poolTargets(ctx context.Context, backend string) (map[string]poolTarget, error) {
	profiles, err := s.Profiles(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]poolTarget{}
	for _, prof := range profiles {
		if prof.PoolSize <= 0 {
			continue
		}
		b, spec, _, err := s.plan(ctx, CreateRequest{Profile: prof.Name})
		if err != nil {
			s.log.Warn("pool: profile cannot be planned", "profile", prof.Name, "err", err)
			continue
		}
		if b == backend {
			out[poolKey(prof.Name, s.unit(ctx, b), spec)] = poolTarget{profile: prof.Name, size: prof.PoolSize, spec: spec}
		}
	}
	return out, nil
}

// refillPools brings backend's pools to their sizes: members of pools no
// profile wants any more, and members above a pool's size, are deleted;
// missing ones are created one after another (a failure stops that pool
// until the next pass).
func (s *Service) refillPools(ctx context.Context, backend string) {
	targets, err := s.poolTargets(ctx, backend)
	if err != nil {
		s.log.Warn("pool: list profiles", "backend", backend, "err", err)
		return
	}
	recs, _, err := s.cfg.Store.ListSandboxes(ctx, store.ListFilter{Backend: backend, Instance: s.Instance(ctx, backend), AllPools: true,
		States: []sandbox.State{sandbox.StatePending, sandbox.StateRunning}})
	if err != nil {
		s.log.Warn("pool: list members", "backend", backend, "err", err)
		return
	}
	have := map[string]int{}
	for _, rec := range recs {
		if rec.Pool == "" {
			continue
		}
		if have[rec.Pool] >= targets[rec.Pool].size {
			s.retire(ctx, rec)
			continue
		}
		have[rec.Pool]++
	}
	keys := make([]string, 0, len(targets))
	for k := range targets {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		t := targets[key]
		for n := have[key]; n < t.size && ctx.Err() == nil; n++ {
			if err := s.addPoolMember(ctx, backend, key, t); err != nil {
				s.log.Warn("pool: create member", "backend", backend, "profile", t.profile, "err", err)
				break
			}
		}
	}
}

// addPoolMember creates one ready box of pool key.
func (s *Service) addPoolMember(ctx context.Context, backend, key string, t poolTarget) error {
	specJSON, err := json.Marshal(t.spec)
	if err != nil {
		return fmt.Errorf("encode spec: %w", err)
	}
	now := s.stamp()
	rec := &store.Sandbox{
		ID: newID(), Backend: backend, Profile: t.profile, Pool: key, State: sandbox.StatePending, Reason: "pool_fill",
		Image: t.spec.Image, Spec: specJSON, Entrypoint: t.spec.Entrypoint, CreatedAt: now, UpdatedAt: now, LastActiveAt: now,
		Instance: s.Instance(ctx, backend),
	}
	return s.provision(ctx, rec, t.spec, nil)
}

// poolStats counts claims per pool and outcome ("hit", "miss").
type poolStats struct {
	mu     sync.Mutex
	claims map[[2]string]int64
}

func (p *poolStats) count(pool, outcome string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claims == nil {
		p.claims = map[[2]string]int64{}
	}
	p.claims[[2]string{pool, outcome}]++
}

// writePoolMetrics writes ready boxes per pool and claims per outcome.
func (s *Service) writePoolMetrics(ctx context.Context, w io.Writer) error {
	recs, _, err := s.cfg.Store.ListSandboxes(ctx, store.ListFilter{AllPools: true, States: []sandbox.State{sandbox.StateRunning}})
	if err != nil {
		return fmt.Errorf("pool metrics: %w", err)
	}
	ready := map[string]int{}
	for _, r := range recs {
		if r.Pool != "" {
			ready[r.Pool]++
		}
	}
	fmt.Fprintf(w, "# HELP astrabox_pool_ready Ready boxes waiting in each warm pool.\n# TYPE astrabox_pool_ready gauge\n")
	for _, k := range sortedKeys(ready) {
		fmt.Fprintf(w, "astrabox_pool_ready{pool=%q} %d\n", k, ready[k])
	}
	s.pools.mu.Lock()
	defer s.pools.mu.Unlock()
	fmt.Fprintf(w, "# HELP astrabox_pool_claims_total Creates that asked a warm pool, by outcome.\n# TYPE astrabox_pool_claims_total counter\n")
	keys := make([][2]string, 0, len(s.pools.claims))
	for k := range s.pools.claims {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"\x00"+keys[i][1] < keys[j][0]+"\x00"+keys[j][1] })
	for _, k := range keys {
		fmt.Fprintf(w, "astrabox_pool_claims_total{pool=%q,outcome=%q} %d\n", k[0], k[1], s.pools.claims[k])
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
