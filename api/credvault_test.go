package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// lockedBuffer collects log lines written concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// vaultEnv serves the egress API for sandbox records written straight
// into the store (nothing runs): "cp" has credentialProxy and is behind
// the egress Manager, "away" has it but is not, "plain" has not.
type vaultEnv struct {
	url  string
	logs *lockedBuffer
	svc  *lifecycle.Service
	m    *egress.Manager
}

func newVaultEnv(t *testing.T) *vaultEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ca, _, err := trust.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	m := egress.NewManager(egress.Config{CA: ca, Logger: log})
	t.Cleanup(m.Close)
	lo := netip.MustParseAddr("127.0.0.1")
	g, err := m.OpenGate(egress.GateConfig{Proxy: netip.AddrPortFrom(lo, 0), DNS: netip.AddrPortFrom(lo, 0), Gateway: lo})
	if err != nil {
		t.Fatal(err)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, _ := vault.New(key)
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, DefaultBackend: "process",
		Egress: m, Vault: ring, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	np := sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, DefaultAction: "allow", Rules: []sandbox.NetworkRule{
		{Action: "allow", Target: "api.example.com"}, {Action: "allow", Target: "*.example.org"}}}
	for i, r := range []struct {
		id string
		cp bool
	}{{"cp", true}, {"away", true}, {"plain", false}} {
		spec, _ := json.Marshal(sandbox.Spec{Image: "host", Network: np, CredentialProxy: r.cp})
		now := time.Now()
		if err := st.CreateSandbox(ctx, &store.Sandbox{ID: r.id, Backend: "process", State: sandbox.StateRunning, Spec: spec,
			CreatedAt: now, UpdatedAt: now, LastActiveAt: now}); err != nil {
			t.Fatal(err)
		}
		if r.id != "away" {
			if _, err := g.Add(r.id, netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)}), np); err != nil {
				t.Fatal(err)
			}
		}
	}
	hs := httptest.NewServer(api.New(api.Config{Service: svc, Store: st, Insecure: true, Logger: log}))
	t.Cleanup(hs.Close)
	return &vaultEnv{url: hs.URL, logs: logs, svc: svc, m: m}
}

func (e *vaultEnv) call(t *testing.T, method, id, path, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, e.url+"/v1/sandboxes/"+id+"/proxy/18080"+path, rd)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Values that must never come back.
const (
	secretA = "sk-vault-value-AAAA-0123456789"
	secretB = "sk-vault-value-BBBB-9876543210"
)

func TestCredentialVaultAPI(t *testing.T) {
	e := newVaultEnv(t)
	createBody := `{"credentials": [{"name": "tok", "source": {"type": "inline", "value": "` + secretA + `"}},
		{"name": "id", "source": {"value": "client-id-1"}}],
	  "bindings": [{"name": "api", "match": {"hosts": ["api.example.com"], "paths": ["/v1/*"]}, "auth": {"type": "bearer", "credential": "tok"}},
		{"name": "org", "match": {"schemes": ["http"], "ports": [80], "hosts": ["*.example.org"]},
		 "auth": {"type": "customHeaders", "headers": [{"name": "x-client-id", "credential": "id"}, {"name": "X-Client-Secret", "credential": "tok"}]}}]}`
	steps := []struct {
		name         string
		method, id   string
		path, body   string
		status       int
		want, absent string // in the answer; not in the answer
	}{
		{"no vault yet", "GET", "cp", "/credential-vault", "", 404, "CREDENTIAL_VAULT_NOT_FOUND", ""},
		{"not enabled", "POST", "plain", "/credential-vault", `{"credentials": [], "bindings": []}`, 412, "CREDENTIAL_PROXY_NOT_ENABLED", ""},
		{"not enabled, read", "GET", "plain", "/credential-vault/credentials", "", 412, "CREDENTIAL_PROXY_NOT_ENABLED", ""},
		{"not behind the proxy", "POST", "away", "/credential-vault", `{"credentials": [], "bindings": []}`, 412, "CREDENTIAL_PROXY_UNAVAILABLE", ""},
		{"no such sandbox", "GET", "nope", "/credential-vault", "", 404, "SANDBOX_NOT_FOUND", ""},
		{"unknown field", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "x", "source": {"type": "inline", "vaule": "` + secretA + `"}}], "bindings": []}`, 400, `unknown field "vaule"`, secretA},
		{"syntax error inside a value", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "x", "source": {"value": "` + secretA + `\q"}}]}`, 400, "syntax error at byte", secretA},
		{"value of the wrong type", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "x", "source": {"value": 12345}}]}`, 400, "field credentials.source.value must be string", ""},
		{"two values", "POST", "cp", "/credential-vault", `{} {}`, 400, "more than one JSON value", ""},
		{"value with a newline", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "x", "source": {"value": "` + secretA + `\r\nX-Evil: 1"}}]}`, 400, "header text", secretA},
		{"unknown credential", "POST", "cp", "/credential-vault", `{"credentials": [], "bindings": [{"name": "b", "match": {"hosts": ["api.example.com"]}, "auth": {"type": "bearer", "credential": "tok"}}]}`, 400, `names credential "tok"`, ""},
		{"host not explicitly allowed", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "tok", "source": {"value": "` + secretA + `"}}], "bindings": [{"name": "b", "match": {"hosts": ["evil.test"]}, "auth": {"type": "bearer", "credential": "tok"}}]}`, 400, "explicit allow rule", secretA},
		{"reserved header", "POST", "cp", "/credential-vault", `{"credentials": [{"name": "tok", "source": {"value": "v"}}], "bindings": [{"name": "b", "match": {"hosts": ["api.example.com"]}, "auth": {"type": "apiKey", "name": "Host", "credential": "tok"}}]}`, 400, "frames or routes", ""},
		{"create", "POST", "cp", "/credential-vault", createBody, 201, `"revision":1`, secretA},
		{"create again", "POST", "cp", "/credential-vault", `{"credentials": [], "bindings": []}`, 409, "CREDENTIAL_VAULT_EXISTS", ""},
		{"state", "GET", "cp", "/credential-vault", "", 200, `"auth":{"type":"customHeaders"}`, secretA},
		{"state hides references", "GET", "cp", "/credential-vault", "", 200, `"hosts":["*.example.org"]`, `"credential"`},
		{"credentials", "GET", "cp", "/credential-vault/credentials", "", 200, `{"name":"id","sourceType":"inline","revision":1}`, "client-id-1"},
		{"one credential", "GET", "cp", "/credential-vault/credentials/tok", "", 200, `"name":"tok"`, secretA},
		{"a missing credential", "GET", "cp", "/credential-vault/credentials/nope", "", 404, "CREDENTIAL_NOT_FOUND", ""},
		{"bindings", "GET", "cp", "/credential-vault/bindings", "", 200, `"paths":["/v1/*"]`, secretA},
		{"one binding", "GET", "cp", "/credential-vault/bindings/api", "", 200, `"auth":{"type":"bearer"}`, ""},
		{"a missing binding", "GET", "cp", "/credential-vault/bindings/nope", "", 404, "CREDENTIAL_BINDING_NOT_FOUND", ""},
		{"no delete of one credential", "DELETE", "cp", "/credential-vault/credentials/tok", "", 405, "", ""},
		{"unknown route", "GET", "cp", "/credential-vault/other", "", 404, "", ""},
		{"stale revision", "PATCH", "cp", "/credential-vault", `{"expectedRevision": 7, "credentials": {"replace": [{"name": "tok", "source": {"value": "` + secretB + `"}}]}}`, 409, "CREDENTIAL_VAULT_REVISION_MISMATCH", secretB},
		{"delete a credential in use", "PATCH", "cp", "/credential-vault", `{"credentials": {"delete": ["id"]}}`, 400, `names credential "id"`, ""},
		{"add an existing credential", "PATCH", "cp", "/credential-vault", `{"credentials": {"add": [{"name": "tok", "source": {"value": "` + secretB + `"}}]}}`, 409, "CONFLICT", secretB},
		{"replace", "PATCH", "cp", "/credential-vault", `{"expectedRevision": 1, "credentials": {"replace": [{"name": "tok", "source": {"value": "` + secretB + `"}}]}}`, 200, `{"name":"tok","sourceType":"inline","revision":2}`, secretB},
		{"delete a binding and its credential", "PATCH", "cp", "/credential-vault", `{"expectedRevision": 2, "credentials": {"delete": ["id"]}, "bindings": {"delete": ["org"]}}`, 200, `"revision":3`, ""},
		{"delete the vault", "DELETE", "cp", "/credential-vault", "", 204, "", ""},
		{"gone", "GET", "cp", "/credential-vault/bindings", "", 404, "CREDENTIAL_VAULT_NOT_FOUND", ""},
		{"delete again", "DELETE", "cp", "/credential-vault", "", 404, "CREDENTIAL_VAULT_NOT_FOUND", ""},
		{"create anew, null lists", "POST", "cp", "/credential-vault", `{"credentials": null, "bindings": null}`, 201, `{"revision":1,"credentials":[],"bindings":[]}`, ""},
		{"a name with a space", "PATCH", "cp", "/credential-vault", `{"credentials": {"add": [{"name": "my token", "source": {"value": "` + secretA + `"}}]}}`, 200, `"name":"my token"`, secretA},
		{"read by its escaped name", "GET", "cp", "/credential-vault/credentials/my%20token", "", 200, `{"name":"my token","sourceType":"inline","revision":2}`, ""},
		{"the policy is still served", "GET", "cp", "/policy", "", 200, `"status":"ok"`, ""},
	}
	for _, s := range steps {
		status, body := e.call(t, s.method, s.id, s.path, s.body)
		if status != s.status || !strings.Contains(body, s.want) || (s.absent != "" && strings.Contains(body, s.absent)) {
			t.Fatalf("%s: %s %s = %d %s; want %d with %q without %q", s.name, s.method, s.path, status, body, s.status, s.want, s.absent)
		}
		if strings.Contains(body, secretA) || strings.Contains(body, secretB) {
			t.Fatalf("%s: the answer carries a value: %s", s.name, body)
		}
	}
	if logs := e.logs.String(); strings.Contains(logs, secretA) || strings.Contains(logs, secretB) || strings.Contains(logs, "client-id-1") {
		t.Fatalf("a value reached the log:\n%s", logs)
	}
}
