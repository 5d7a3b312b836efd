package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// The vaults' other users: Agents that name them, Sessions whose runtime
// gets their secrets, and master-key rotation.

// checkVaultIDs validates an Agent's vault_ids: at most maxAgentVaults,
// each once, each existing (VAULT_NOT_FOUND), and no environment variable
// named by secrets of two of them.
func (s *Catalog) checkVaultIDs(ctx context.Context, ids []string) error {
	if len(ids) > maxAgentVaults {
		return invalid("vault_ids: an Agent has at most %d vaults", maxAgentVaults)
	}
	vs, err := s.vaults(ctx, ids)
	if err != nil {
		return err
	}
	return envConflicts(vs)
}

// vaults reads vaults ids in order; each must exist, once.
func (s *Catalog) vaults(ctx context.Context, ids []string) ([]*store.Vault, error) {
	out := make([]*store.Vault, 0, len(ids))
	for i, id := range ids {
		if slices.Contains(ids[:i], id) {
			return nil, invalid("vault_ids: %s is given twice", id)
		}
		v, err := s.vault(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// envConflicts refuses secrets of two vaults that name one variable.
func envConflicts(vs []*store.Vault) error {
	owner := map[string]string{}
	for _, v := range vs {
		for _, sec := range v.Secrets {
			if other, ok := owner[sec.Name]; ok {
				return invalid("vault_ids: vaults %s and %s both have a secret %s (one environment variable each)", other, v.ID, sec.Name)
			}
			owner[sec.Name] = v.ID
		}
	}
	return nil
}

// OpenVaults returns the secrets of vaults ids, opened for protected
// delivery: each an egress.Secret whose Name is its environment variable
// and whose Value is the real value (Placeholder is the caller's). A vault
// that is gone fails with VAULT_NOT_FOUND, two secrets naming one variable
// with INVALID_REQUEST, a value that does not open (its master key is no
// longer listed, or the record was tampered with) with an internal error
// naming the secret. The values are the caller's to keep from every log,
// error and record.
func (s *Catalog) OpenVaults(ctx context.Context, ids []string) ([]egress.Secret, error) {
	vs, err := s.vaults(ctx, ids)
	if err != nil {
		return nil, err
	}
	if err := envConflicts(vs); err != nil {
		return nil, err
	}
	var out []egress.Secret
	for _, v := range vs {
		for _, sec := range v.Secrets {
			val, err := s.cfg.Vault.Open(sec.Sealed, secretAAD(v.ID, sec))
			if err != nil {
				return nil, fmt.Errorf("open secret %s of vault %s: %w", sec.Name, v.ID, err)
			}
			out = append(out, egress.Secret{Name: sec.Name, Value: string(val), Host: sec.Host, PathPrefix: sec.PathPrefix,
				Header: sec.Header, Format: sec.Format})
		}
	}
	return out, nil
}

// ResealVaultSecrets re-seals every vault secret sealed under an older
// master key with the newest one (see ResealModelKeys) and returns how
// many it re-sealed. A secret that does not open is left as it is and
// reported in the error after the others are done.
func (s *Catalog) ResealVaultSecrets(ctx context.Context) (int, error) {
	vs, err := s.st.ListVaults(ctx, "", 0)
	if err != nil {
		return 0, fmt.Errorf("list vaults: %w", err)
	}
	n := 0
	var errs []error
	for _, listed := range vs {
		if !slices.ContainsFunc(listed.Secrets, func(sec store.VaultSecret) bool { return s.cfg.Vault.NeedsReseal(sec.Sealed) }) {
			continue
		}
		count := 0
		var verrs []error
		_, err := s.changeVault(ctx, listed.ID, nil, func(v *store.Vault) (bool, error) {
			count, verrs = 0, nil
			for i, sec := range v.Secrets {
				if !s.cfg.Vault.NeedsReseal(sec.Sealed) {
					continue
				}
				aad := secretAAD(v.ID, sec)
				val, err := s.cfg.Vault.Open(sec.Sealed, aad)
				if err != nil {
					verrs = append(verrs, fmt.Errorf("reseal secret %s of vault %s: %w", sec.Name, v.ID, err))
					continue
				}
				sealed, err := s.cfg.Vault.Seal(val, aad)
				if err != nil {
					return false, err
				}
				v.Secrets[i].Sealed = sealed
				count++
			}
			return count > 0, nil
		})
		if sandbox.CodeOf(err) == CodeVaultNotFound {
			continue // deleted meanwhile
		}
		errs = append(errs, verrs...)
		if err != nil {
			return n, fmt.Errorf("reseal vault %s: %w", listed.ID, err)
		}
		n += count
	}
	return n, errors.Join(errs...)
}
