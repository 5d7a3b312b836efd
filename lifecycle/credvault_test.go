package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/credproxy"
	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

func newKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// limitedProcess is the process harness claiming network limited, for
// plans (it starts nothing here): through the server's egress proxy
// unless elsewhere is set (a backend whose limited mode is its own).
type limitedProcess struct {
	*process.Provider
	elsewhere bool
}

func (p limitedProcess) Capabilities() sandbox.Capabilities {
	c := p.Provider.Capabilities()
	c.NetworkModes = append(slices.Clone(c.NetworkModes), sandbox.NetworkLimited)
	c.EgressProxy = !p.elsewhere
	return c
}

// newVaultService is a service with an egress Manager (with a CA) and a
// ring, over st.
func newVaultService(t *testing.T, st store.Store, ring *vault.Ring) (*Service, *egress.Manager) {
	t.Helper()
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	ca, _, err := trust.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	m := egress.NewManager(egress.Config{CA: ca})
	t.Cleanup(m.Close)
	svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"process": limitedProcess{Provider: p}}, DefaultBackend: "process", Egress: m, Vault: ring})
	if err != nil {
		t.Fatal(err)
	}
	return svc, m
}

func TestPlanCredentialProxy(t *testing.T) {
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ring, _ := vault.New(newKey())
	svc, _ := newVaultService(t, st, ring)
	limited := &sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow"}
	_, spec, _, err := svc.plan(t.Context(), CreateRequest{CredentialProxy: true, Network: limited, Env: map[string]string{"SSL_CERT_FILE": "/mine.pem"}})
	if err != nil {
		t.Fatal(err)
	}
	if !spec.CredentialProxy || spec.Env["SSL_CERT_FILE"] != "/mine.pem" || spec.Env["CURL_CA_BUNDLE"] != trust.BundlePath || spec.Env["NODE_EXTRA_CA_CERTS"] != trust.CAPath {
		t.Fatalf("spec %+v", spec)
	}
	if _, _, _, err := svc.plan(t.Context(), CreateRequest{CredentialProxy: true}); sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("with network none: %v", err)
	}
	// A backend whose network limited is not the server's proxy refuses
	// it before anything is made.
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	ca, _, _ := trust.NewCA()
	m := egress.NewManager(egress.Config{CA: ca})
	t.Cleanup(m.Close)
	other, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"process": limitedProcess{Provider: p, elsewhere: true}}, DefaultBackend: "process", Egress: m, Vault: ring})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := other.plan(t.Context(), CreateRequest{CredentialProxy: true, Network: limited}); sandbox.CodeOf(err) != sandbox.CodeCapability ||
		!strings.Contains(err.Error(), "egress proxy") {
		t.Fatalf("on a backend whose limited is another's: %v", err)
	}
	// A server without an egress proxy refuses it.
	plain := newTestService(t, nil, 0)
	if _, _, _, err := plain.plan(t.Context(), CreateRequest{CredentialProxy: true, Network: limited}); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("without an egress proxy: %v", err)
	}
}

// TestRestoreCredentialVaults: a new server hands the egress proxy the
// vaults of live sandboxes, re-sealed under its newest master key, and
// forgets those of sandboxes that are gone.
func TestRestoreCredentialVaults(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	oldKey := newKey()
	ring, _ := vault.New(oldKey)
	svc, m := newVaultService(t, st, ring)
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "deny", Rules: []sandbox.NetworkRule{{Action: "allow", Target: "api.test"}}}
	spec, _ := json.Marshal(sandbox.Spec{Image: "host", Network: np, CredentialProxy: true})
	now := time.Now()
	for _, id := range []string{"live", "gone"} {
		if err := st.CreateSandbox(ctx, &store.Sandbox{ID: id, Backend: "process", State: sandbox.StateRunning, Spec: spec, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		v, err := credproxy.New(credproxy.CreateRequest{
			Credentials: []credproxy.Credential{{Name: "tok", Source: credproxy.CredentialSource{Value: "real-value"}}},
			Bindings:    []credproxy.CredentialBinding{{Name: "api", Match: credproxy.CredentialMatch{Hosts: []string{"api.test"}}, Auth: credproxy.CredentialAuth{Type: credproxy.AuthBearer, Credential: "tok"}}},
		}, func(string) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.storeVault(ctx, id, v, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.DeleteSandbox(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	if names := m.BindingNames("live"); names != nil {
		t.Fatalf("bindings before the restore: %v", names)
	}
	rotated, _ := vault.New(newKey(), oldKey)
	svc2, m2 := newVaultService(t, st, rotated)
	n, err := svc2.RestoreCredentialVaults(ctx)
	if err != nil || n != 1 {
		t.Fatalf("restore: %d %v", n, err)
	}
	if names := m2.BindingNames("live"); !slices.Equal(names, []string{"api"}) {
		t.Fatalf("bindings after the restore: %v", names)
	}
	sv, err := st.GetSandboxVault(ctx, "live")
	if err != nil || rotated.NeedsReseal(sv.Sealed) || sv.Revision != 1 {
		t.Fatalf("after the restore: %+v %v (re-sealed: %v)", sv, err, err == nil && !rotated.NeedsReseal(sv.Sealed))
	}
	if _, err := st.GetSandboxVault(ctx, "gone"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the vault of a sandbox that is gone: %v", err)
	}
	// The sealed document is bound to its sandbox: moved to another it
	// does not open.
	sv.SandboxID = "other"
	if _, err := svc2.openVault(sv); err == nil {
		t.Fatal("a vault opened as another sandbox's")
	}
}
