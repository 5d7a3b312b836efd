package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"maps"
	"slices"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/platform"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Protected delivery. When a Session's Agent names vaults, its box gets,
// for each secret, an environment variable of the secret's name holding a
// placeholder made for this runtime (unguessable, never reused by another
// Session), and never the value. The box's network becomes limited, so
// that every connection it opens passes the egress proxy, and the proxy's
// state for the box gets the secrets (egress.Box.SetSecrets): the proxy
// puts a value into a request only where the box sent its placeholder to
// the secret's destination, terminating TLS there with the server's
// egress CA. The box trusts that CA through a bundle written into it (its
// own roots and the CA) that the usual variables name (trust.Install
// and trust.Env, which sandboxes created with credentialProxy share).
//
// Which network the box gets (deliveryPolicy):
//   - a profile of network unrestricted: limited with defaultAction allow.
//     Every host stays reachable over TCP, except what the proxy always
//     refuses (the host, metadata, private ranges) as it does for
//     unrestricted boxes; UDP other than DNS, and ICMP, do not leave.
//   - none or limited: limited with only the secrets' hosts allowed. A
//     profile's network names no rules, so nothing else is reachable, as
//     before; the secrets' destinations are, since the Agent was given
//     them to use.
//
// Such boxes are never claimed from a warm pool (their network and
// environment differ from the pool's). A server without an egress proxy,
// a backend that does not route limited through this server's proxy, or
// a proxy without a CA fails the Session's start with
// PROTECTED_DELIVERY_UNSUPPORTED (a box already made for it is deleted):
// the program never runs without the proxy. Values are read when a
// runtime is built or re-attached: a secret changed later reaches the
// Session when its runtime is next built. The proxy keeps a box's secrets
// as long as it keeps the box (until the box is deleted).

// delivery is what a runtime's box gets from its Agent's vaults.
type delivery struct {
	// secrets have their real values and this runtime's placeholders;
	// each Name is its environment variable.
	secrets []egress.Secret
}

// unsupported is the error of a Session whose secrets cannot be delivered.
func unsupported(format string, args ...any) error {
	return sandbox.Errorf(platform.CodeDeliveryUnsupported, "protected delivery of the agent's vault secrets: "+format, args...)
}

// planDelivery opens agent a's vaults for a box of backend. Each secret
// gets a new placeholder, or with keep (a re-attached runtime's variables
// and placeholders) the one the box has; a secret the box has no variable
// for is left out.
func (r *runner) planDelivery(ctx context.Context, a *store.Agent, backend string, keep map[string]string) (*delivery, error) {
	eg := r.m.cfg.Egress
	if eg == nil {
		return nil, unsupported("this server runs no egress proxy")
	}
	if eg.CA() == nil {
		return nil, unsupported("the egress proxy has no CA to terminate TLS with")
	}
	if p, ok := r.m.cfg.Sandboxes.Backends()[backend]; ok && !p.Capabilities().Has(sandbox.CapNetworkLimited) {
		return nil, unsupported("backend %s does not offer network limited, which routes a box through the egress proxy", backend)
	}
	secrets, err := r.m.cfg.Catalog.OpenVaults(ctx, a.VaultIDs)
	if err != nil {
		return nil, err
	}
	d := &delivery{}
	for _, s := range secrets {
		if keep != nil {
			if s.Placeholder = keep[s.Name]; s.Placeholder == "" {
				continue
			}
		} else {
			s.Placeholder = newSecretPlaceholder()
		}
		d.secrets = append(d.secrets, s)
	}
	return d, nil
}

func newSecretPlaceholder() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return "abx-secret-" + hex.EncodeToString(b[:])
}

// placeholders returns each secret's variable and placeholder, for the
// runtime's record (placeholders are not secret: the box holds them).
func (d *delivery) placeholders() map[string]string {
	m := make(map[string]string, len(d.secrets))
	for _, s := range d.secrets {
		m[s.Name] = s.Placeholder
	}
	return m
}

// env is the box's environment for delivery: the placeholders and the
// trust variables.
func (d *delivery) env() map[string]string {
	env := d.placeholders()
	maps.Copy(env, trust.Env())
	return env
}

// deliveryPolicy is the network policy of a box that gets secrets (see the
// comment at the top of this file).
func deliveryPolicy(mode sandbox.NetworkMode, secrets []egress.Secret) sandbox.NetworkPolicy {
	if mode == sandbox.NetworkUnrestricted {
		return sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow"}
	}
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny"}
	for _, s := range secrets {
		if r := (sandbox.NetworkRule{Action: "allow", Target: s.Host}); !slices.Contains(np.Rules, r) {
			np.Rules = append(np.Rules, r)
		}
	}
	return np
}

// startDelivery makes box, just built, trust the egress CA and hands the
// proxy the secrets. The box must be behind this server's proxy.
func (r *runner) startDelivery(ctx context.Context, box *store.Sandbox, ex *execdclient.Client, d *delivery) error {
	eb := r.m.cfg.Egress.Box(box.ID)
	if eb == nil {
		return unsupported("sandbox %s (backend %s) is not behind this server's egress proxy", box.ID, box.Backend)
	}
	if err := trust.Install(ctx, ex, r.m.cfg.Egress.CA().CertPEM()); err != nil {
		return err
	}
	eb.SetSecrets(d.secrets)
	r.log.Info("vault secrets delivered to the egress proxy", "sandbox_id", box.ID, "secrets", len(d.secrets))
	return nil
}

// resumeDelivery hands the proxy the secrets of a re-attached runtime
// whose record names placeholders.
func (r *runner) resumeDelivery(ctx context.Context, box *store.Sandbox, a *store.Agent, keep map[string]string) error {
	d, err := r.planDelivery(ctx, a, box.Backend, keep)
	if err != nil {
		return err
	}
	eb := r.m.cfg.Egress.Box(box.ID)
	if eb == nil {
		return unsupported("sandbox %s (backend %s) is not behind this server's egress proxy", box.ID, box.Backend)
	}
	eb.SetSecrets(d.secrets)
	return nil
}
