package lifecycle

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Network policy at run time. A sandbox of network mode limited changes
// its egress rules without a restart (OpenSandbox's egress API, and the
// operator's lifecycle route): the backend applies the new policy
// (sandbox.PolicySetter), then the record keeps it, so that reads and a
// restarted server see it.

// NetworkPolicy returns the network policy sandbox id has now.
func (s *Service) NetworkPolicy(ctx context.Context, id string) (sandbox.NetworkPolicy, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	spec, err := recordSpec(rec)
	if err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	return spec.Network, nil
}

// UpdateNetworkPolicy changes the policy of sandbox id to what change makes
// of the current one. Only a Running or Paused sandbox of mode limited on
// a backend that implements sandbox.PolicySetter changes (else
// CAPABILITY_NOT_SUPPORTED or CONFLICT); change's error is returned as is.
// It returns the policy in force afterwards.
func (s *Service) UpdateNetworkPolicy(ctx context.Context, id string, change func(sandbox.NetworkPolicy) (sandbox.NetworkPolicy, error)) (sandbox.NetworkPolicy, error) {
	unlock := s.lock(id)
	defer unlock()
	rec, err := s.Get(ctx, id)
	if err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	spec, err := recordSpec(rec)
	if err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	if spec.Network.Mode != sandbox.NetworkLimited {
		return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeCapability,
			"sandbox %s has network %s: only the rules of network limited (networkPolicy defaultAction deny, or allow with deny rules) change at run time", id, spec.Network.Mode)
	}
	if rec.State != sandbox.StateRunning && rec.State != sandbox.StatePaused {
		return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeConflict, "sandbox %s is %s", id, rec.State)
	}
	p, ok := s.cfg.Backends[rec.Backend]
	if !ok {
		return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeBackendDisabled, "backend %q is not enabled", rec.Backend)
	}
	setter, ok := p.(sandbox.PolicySetter)
	if !ok {
		return sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeCapability, "backend %s does not change network policies at run time", rec.Backend)
	}
	next, err := change(spec.Network)
	if err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	next.Mode = sandbox.NetworkLimited
	if err := s.ensureAttached(ctx, rec); err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	if err := setter.SetNetworkPolicy(ctx, id, next); err != nil {
		return sandbox.NetworkPolicy{}, err
	}
	_, _, err = s.write(ctx, id, func(cur *store.Sandbox) error {
		sp, err := recordSpec(cur)
		if err != nil {
			return err
		}
		sp.Network = next
		b, err := json.Marshal(sp)
		if err != nil {
			return fmt.Errorf("encode spec: %w", err)
		}
		cur.Spec = b
		return nil
	})
	if err != nil {
		return sandbox.NetworkPolicy{}, fmt.Errorf("record network policy of %s: %w", id, err)
	}
	return next, nil
}

// recordSpec decodes the Spec a record keeps.
func recordSpec(rec *store.Sandbox) (sandbox.Spec, error) {
	var spec sandbox.Spec
	if len(rec.Spec) == 0 {
		return spec, nil
	}
	if err := json.Unmarshal(rec.Spec, &spec); err != nil {
		return spec, fmt.Errorf("sandbox %s: stored spec: %w", rec.ID, err)
	}
	if spec.Network.Mode == "" {
		spec.Network.Mode = sandbox.NetworkNone
	}
	return spec, nil
}
