package lifecycle

import (
	"context"
	"errors"
	"fmt"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/credproxy"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Credential Vaults. A sandbox created with CredentialProxy (OpenSandbox's
// credentialProxy.enabled) has network limited, trusts the server's egress
// CA (a bundle written into the box, and the variables of trust.Env in
// its environment: package egress/trust) and may get a Credential Vault through its egress
// API (package api). The vault is kept in the store as one document
// sealed with the server's master key ring, bound to the sandbox's id
// (store.SandboxVault): values are never stored, logged or answered in the
// clear, and replicas sharing the key file read it. After each change the
// egress proxy gets the vault's bindings (egress.Manager.SetBindings,
// kept by box id), and a restarted server hands them to it again
// (RestoreCredentialVaults) before it serves. A sandbox's vault goes with
// the sandbox.

// vaultAAD binds a sealed vault to its sandbox.
func vaultAAD(id string) string { return "sandbox-vault:" + id }

// credentialProxyReady reports why this server cannot give a sandbox a
// credential proxy, if it cannot: CAPABILITY_NOT_SUPPORTED at create.
func (s *Service) credentialProxyReady() error {
	switch {
	case s.cfg.Egress == nil:
		return sandbox.Errorf(sandbox.CodeCapability, "credentialProxy: this server runs no egress proxy")
	case s.cfg.Egress.CA() == nil:
		return sandbox.Errorf(sandbox.CodeCapability, "credentialProxy: the egress proxy has no CA to terminate TLS with")
	case s.cfg.Vault == nil:
		return sandbox.Errorf(sandbox.CodeCapability, "credentialProxy: this server has no master key to seal credential vaults with")
	}
	return nil
}

// checkCredentialProxy checks that rec's box, just created, is behind this
// server's egress proxy (its backend, having capability EgressProxy,
// installed the proxy's CA in it before its entrypoint started). A box
// its backend did not put there is refused.
func (s *Service) checkCredentialProxy(rec *store.Sandbox) error {
	if s.cfg.Egress.Box(rec.ID) == nil {
		return sandbox.Errorf(sandbox.CodeCapability, "credentialProxy: backend %s does not route network limited through this server's egress proxy", rec.Backend)
	}
	return nil
}

// vaultSandbox returns the record and policy of sandbox id if it may have
// a Credential Vault: created with CredentialProxy (else
// CREDENTIAL_PROXY_NOT_ENABLED), on a server that can seal one. With write
// it must also be Running or Paused (CONFLICT) and behind this server's
// egress proxy (CREDENTIAL_PROXY_UNAVAILABLE).
func (s *Service) vaultSandbox(ctx context.Context, id string, write bool) (*store.Sandbox, sandbox.NetworkPolicy, error) {
	rec, err := s.Get(ctx, id)
	if err != nil {
		return nil, sandbox.NetworkPolicy{}, err
	}
	spec, err := recordSpec(rec)
	if err != nil {
		return nil, sandbox.NetworkPolicy{}, err
	}
	if !spec.CredentialProxy {
		return nil, sandbox.NetworkPolicy{}, sandbox.Errorf(credproxy.CodeNotEnabled,
			"sandbox %s was not created with credentialProxy.enabled: create it with credentialProxy {\"enabled\": true} and a networkPolicy to use a Credential Vault", id)
	}
	if s.cfg.Egress == nil || s.cfg.Egress.CA() == nil || s.cfg.Vault == nil {
		return nil, sandbox.NetworkPolicy{}, sandbox.Errorf(credproxy.CodeUnavailable, "this server runs no egress proxy that can terminate TLS")
	}
	if !write {
		return rec, spec.Network, nil
	}
	if rec.State != sandbox.StateRunning && rec.State != sandbox.StatePaused {
		return nil, sandbox.NetworkPolicy{}, sandbox.Errorf(sandbox.CodeConflict, "sandbox %s is %s", id, rec.State)
	}
	if s.cfg.Egress.Box(id) == nil {
		return nil, sandbox.NetworkPolicy{}, sandbox.Errorf(credproxy.CodeUnavailable,
			"sandbox %s (backend %s) is not behind this server's egress proxy now", id, rec.Backend)
	}
	return rec, spec.Network, nil
}

// loadVault reads and opens sandbox id's vault: CREDENTIAL_VAULT_NOT_FOUND
// when it has none.
func (s *Service) loadVault(ctx context.Context, id string) (*credproxy.Set, *store.SandboxVault, error) {
	sv, err := s.cfg.Store.GetSandboxVault(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, sandbox.Errorf(credproxy.CodeNotFound, "sandbox %s has no Credential Vault (create it with POST /credential-vault)", id)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read credential vault of %s: %w", id, err)
	}
	v, err := s.openVault(sv)
	return v, sv, err
}

func (s *Service) openVault(sv *store.SandboxVault) (*credproxy.Set, error) {
	doc, err := s.cfg.Vault.Open(sv.Sealed, vaultAAD(sv.SandboxID))
	if err != nil {
		return nil, fmt.Errorf("open credential vault of %s: %w", sv.SandboxID, err)
	}
	v, err := credproxy.ParseDocument(doc)
	clear(doc)
	if err != nil {
		return nil, fmt.Errorf("credential vault of %s: %w", sv.SandboxID, err)
	}
	return v, nil
}

// storeVault seals v and stores it over revision prev (0: a create).
func (s *Service) storeVault(ctx context.Context, id string, v *credproxy.Set, prev int64) error {
	doc, err := v.Document()
	if err != nil {
		return err
	}
	sealed, err := s.cfg.Vault.Seal(doc, vaultAAD(id))
	clear(doc)
	if err != nil {
		return err
	}
	err = s.cfg.Store.PutSandboxVault(ctx, &store.SandboxVault{SandboxID: id, Revision: v.Revision, Sealed: sealed}, prev)
	switch {
	case errors.Is(err, store.ErrConflict) && prev == 0:
		return sandbox.Errorf(credproxy.CodeExists, "sandbox %s has a Credential Vault already (change it with PATCH, or DELETE it first)", id)
	case errors.Is(err, store.ErrConflict):
		return sandbox.Errorf(credproxy.CodeRevisionMismatch, "the Credential Vault of sandbox %s changed meanwhile (revision %d is gone)", id, prev)
	case errors.Is(err, store.ErrNotFound):
		return sandbox.Errorf(credproxy.CodeNotFound, "the Credential Vault of sandbox %s was deleted meanwhile", id)
	case err != nil:
		return fmt.Errorf("store credential vault of %s: %w", id, err)
	}
	return nil
}

// CredentialVault returns sandbox id's Credential Vault, for sanitized
// reads (the caller never answers its values).
func (s *Service) CredentialVault(ctx context.Context, id string) (*credproxy.Set, error) {
	if _, _, err := s.vaultSandbox(ctx, id, false); err != nil {
		return nil, err
	}
	v, _, err := s.loadVault(ctx, id)
	return v, err
}

// CreateCredentialVault creates revision 1 of sandbox id's vault from req
// and activates it in the egress proxy. CREDENTIAL_VAULT_EXISTS when the
// sandbox has one; validation errors as credproxy.New says.
func (s *Service) CreateCredentialVault(ctx context.Context, id string, req credproxy.CreateRequest) (*credproxy.Set, error) {
	unlock := s.lock(id)
	defer unlock()
	_, np, err := s.vaultSandbox(ctx, id, true)
	if err != nil {
		return nil, err
	}
	if _, err := s.cfg.Store.GetSandboxVault(ctx, id); err == nil {
		return nil, sandbox.Errorf(credproxy.CodeExists, "sandbox %s has a Credential Vault already (change it with PATCH, or DELETE it first)", id)
	}
	covered, err := egress.ExplicitlyAllowed(np)
	if err != nil {
		return nil, err
	}
	v, err := credproxy.New(req, covered)
	if err != nil {
		return nil, err
	}
	if err := s.storeVault(ctx, id, v, 0); err != nil {
		return nil, err
	}
	s.cfg.Egress.SetBindings(id, v.ProxyBindings())
	s.log.Info("credential vault created", "sandbox_id", id, "revision", v.Revision, "credentials", len(v.Credentials), "bindings", len(v.Bindings))
	return v, nil
}

// PatchCredentialVault applies m to sandbox id's vault atomically (all or
// nothing, see credproxy.Set.Apply) and activates the new revision.
func (s *Service) PatchCredentialVault(ctx context.Context, id string, m credproxy.Mutation) (*credproxy.Set, error) {
	unlock := s.lock(id)
	defer unlock()
	_, np, err := s.vaultSandbox(ctx, id, true)
	if err != nil {
		return nil, err
	}
	cur, sv, err := s.loadVault(ctx, id)
	if err != nil {
		return nil, err
	}
	covered, err := egress.ExplicitlyAllowed(np)
	if err != nil {
		return nil, err
	}
	next, err := cur.Apply(m, covered)
	if err != nil {
		return nil, err
	}
	if err := s.storeVault(ctx, id, next, sv.Revision); err != nil {
		return nil, err
	}
	s.cfg.Egress.SetBindings(id, next.ProxyBindings())
	s.log.Info("credential vault changed", "sandbox_id", id, "revision", next.Revision, "credentials", len(next.Credentials), "bindings", len(next.Bindings))
	return next, nil
}

// DeleteCredentialVault removes sandbox id's vault; its bindings stop at
// once. CREDENTIAL_VAULT_NOT_FOUND when it has none.
func (s *Service) DeleteCredentialVault(ctx context.Context, id string) error {
	unlock := s.lock(id)
	defer unlock()
	if _, _, err := s.vaultSandbox(ctx, id, false); err != nil {
		return err
	}
	err := s.cfg.Store.DeleteSandboxVault(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return sandbox.Errorf(credproxy.CodeNotFound, "sandbox %s has no Credential Vault", id)
	}
	if err != nil {
		return fmt.Errorf("delete credential vault of %s: %w", id, err)
	}
	s.cfg.Egress.SetBindings(id, nil)
	s.log.Info("credential vault deleted", "sandbox_id", id)
	return nil
}

// forgetCredentialVault drops deleted sandbox id's vault, if any.
func (s *Service) forgetCredentialVault(ctx context.Context, id string) {
	if s.cfg.Egress != nil {
		s.cfg.Egress.SetBindings(id, nil)
	}
	err := s.cfg.Store.DeleteSandboxVault(context.WithoutCancel(ctx), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.Warn("delete credential vault of a deleted sandbox", "sandbox_id", id, "err", err)
	}
}

// RestoreCredentialVaults hands the egress proxy the bindings of every
// stored vault of a live sandbox, as a restarted server must before its
// boxes send requests; it re-seals vaults sealed under an older master key
// and removes those whose sandbox is gone. It returns how many vaults it
// activated; one that cannot be read is logged and skipped.
func (s *Service) RestoreCredentialVaults(ctx context.Context) (int, error) {
	if s.cfg.Vault == nil {
		return 0, nil
	}
	all, err := s.cfg.Store.ListSandboxVaults(ctx, "", 0)
	if err != nil {
		return 0, fmt.Errorf("list credential vaults: %w", err)
	}
	n := 0
	for _, sv := range all {
		rec, err := s.cfg.Store.GetSandbox(ctx, sv.SandboxID)
		if errors.Is(err, store.ErrNotFound) {
			s.forgetCredentialVault(ctx, sv.SandboxID)
			continue
		}
		if err != nil {
			return n, fmt.Errorf("read sandbox %s: %w", sv.SandboxID, err)
		}
		if rec.State == sandbox.StateTerminated || rec.State == sandbox.StateFailed {
			continue
		}
		v, err := s.openVault(sv)
		if err != nil {
			s.log.Error("restore credential vault", "sandbox_id", sv.SandboxID, "err", err)
			continue
		}
		if s.cfg.Vault.NeedsReseal(sv.Sealed) {
			if err := s.storeVault(ctx, sv.SandboxID, v, sv.Revision); err != nil {
				s.log.Warn("re-seal credential vault under the newest master key", "sandbox_id", sv.SandboxID, "err", err)
			}
		}
		if s.cfg.Egress == nil {
			continue
		}
		s.cfg.Egress.SetBindings(sv.SandboxID, v.ProxyBindings())
		n++
	}
	return n, nil
}
