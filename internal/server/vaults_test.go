package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// realSecret is a vault value the tests write; no answer, log or error
// may ever carry it.
const realSecret = "ghp-REAL-vault-value-0123456789abcdef"

// apiError is an error answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// raw makes an API request with a raw body and returns the status and the
// answer's bytes.
func raw(t *testing.T, e *servertest.Env, method, path, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, e.URL+path, strings.NewReader(body))
	req.Header.Set(api.HeaderAPIKey, servertest.Key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}

// TestVaultAPI: vaults and their secrets over /api/v1, values write-only
// (in no answer, error message, log line or database file), validation
// with stable codes, and Agents' vault_ids.
func TestVaultAPI(t *testing.T) {
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var logs bytes.Buffer
	h := &harness{t: t}
	h.Env = servertest.New(t, servertest.Options{Store: st, LogTo: &logs})
	h.model = h.Env.Model
	e := h.Env

	var v wire.Vault
	e.Must(201, "POST", "/api/v1/vaults", map[string]any{"name": "github", "description": "CI token",
		"secrets": []map[string]any{{"name": "GH_TOKEN", "value": realSecret, "host": "API.GitHub.com."}}}, &v)
	if !strings.HasPrefix(v.ID, "vlt_") || v.Version != 1 || len(v.Secrets) != 1 {
		t.Fatalf("created %+v", v)
	}
	if s := v.Secrets[0]; s.Host != "api.github.com" || s.Header != "Authorization" || s.Format != "Bearer {value}" || s.PathPrefix != "" {
		t.Fatalf("defaults of the secret: %+v", s)
	}

	// Every answer about the vault, none with the value.
	answers := map[string][]byte{}
	for _, path := range []string{"/api/v1/vaults/" + v.ID, "/api/v1/vaults"} {
		code, b := raw(t, e, "GET", path, "")
		if code != 200 {
			t.Fatalf("GET %s: %d %s", path, code, b)
		}
		answers[path] = b
	}
	code, b := raw(t, e, "PUT", "/api/v1/vaults/"+v.ID+"/secrets/API_KEY",
		`{"value":"`+realSecret+`-2","host":"*.example.com","path_prefix":"/v1","header":"x-api-key"}`)
	if code != 201 {
		t.Fatalf("PUT a new secret: %d %s", code, b)
	}
	answers["put new"] = b
	code, b = raw(t, e, "PUT", "/api/v1/vaults/"+v.ID+"/secrets/API_KEY", `{"value":"`+realSecret+`-3","host":"*.example.com"}`)
	if code != 200 {
		t.Fatalf("PUT a secret again: %d %s", code, b)
	}
	answers["put again"] = b
	for what, b := range answers {
		if bytes.Contains(b, []byte(realSecret)) || bytes.Contains(b, []byte(`"value"`)) || bytes.Contains(b, []byte("sealed")) {
			t.Fatalf("%s shows the value: %s", what, b)
		}
	}
	e.Must(200, "GET", "/api/v1/vaults/"+v.ID, nil, &v)
	if len(v.Secrets) != 2 || v.Secrets[0].Name != "API_KEY" || v.Secrets[0].Header != "Authorization" || v.Secrets[0].PathPrefix != "" || v.Version != 3 {
		t.Fatalf("a replaced secret keeps nothing of the old one but its name: %+v", v)
	}

	// Refusals: stable codes, and no message with the value.
	secretPath := "/api/v1/vaults/" + v.ID + "/secrets/"
	refusals := []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"no value", "PUT", secretPath + "K", `{"host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"no host", "PUT", secretPath + "K", `{"value":"` + realSecret + `"}`, 400, "INVALID_REQUEST"},
		{"not a variable name", "PUT", secretPath + "1BAD", `{"value":"` + realSecret + `","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"a reserved variable", "PUT", secretPath + "SSL_CERT_FILE", `{"value":"` + realSecret + `","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"an ASTRABOX_ variable", "PUT", secretPath + "ASTRABOX_MODEL_KEY", `{"value":"` + realSecret + `","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"an address", "PUT", secretPath + "K", `{"value":"` + realSecret + `","host":"10.0.0.1"}`, 400, "INVALID_REQUEST"},
		{"a wildcard of a top-level domain", "PUT", secretPath + "K", `{"value":"` + realSecret + `","host":"*.com"}`, 400, "INVALID_REQUEST"},
		{"a framing header", "PUT", secretPath + "K", `{"value":"` + realSecret + `","host":"api.test","header":"Host"}`, 400, "INVALID_REQUEST"},
		{"a format without the value", "PUT", secretPath + "K", `{"value":"` + realSecret + `","host":"api.test","format":"Bearer"}`, 400, "INVALID_REQUEST"},
		{"a value with a line break", "PUT", secretPath + "K", `{"value":"` + realSecret + `\r\nX-Evil: 1","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"another name in the body", "PUT", secretPath + "K", `{"name":"J","value":"` + realSecret + `","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"malformed JSON around a value", "PUT", secretPath + "K", `{"value":"` + realSecret + `\q","host":"api.test"}`, 400, "INVALID_REQUEST"},
		{"a wrongly typed value", "POST", "/api/v1/vaults", `{"name":"x","secrets":[{"name":"K","value":["` + realSecret + `"]}]}`, 400, "INVALID_REQUEST"},
		{"a secret given twice", "POST", "/api/v1/vaults", `{"name":"x","secrets":[{"name":"K","value":"` + realSecret + `","host":"a.test"},{"name":"K","value":"v","host":"b.test"}]}`, 400, "INVALID_REQUEST"},
		{"a vault without a name", "POST", "/api/v1/vaults", `{"name":" "}`, 400, "INVALID_REQUEST"},
		{"secrets on PUT of the vault", "PUT", "/api/v1/vaults/" + v.ID, `{"name":"x","secrets":[{"name":"K","value":"` + realSecret + `","host":"a.test"}]}`, 400, "INVALID_REQUEST"},
		{"a stale version", "PUT", "/api/v1/vaults/" + v.ID, `{"name":"x","version":1}`, 409, "VERSION_CONFLICT"},
		{"an unknown vault", "PUT", "/api/v1/vaults/vlt_nope/secrets/K", `{"value":"` + realSecret + `","host":"api.test"}`, 404, "VAULT_NOT_FOUND"},
		{"get an unknown vault", "GET", "/api/v1/vaults/vlt_nope", "", 404, "VAULT_NOT_FOUND"},
		{"delete an unknown secret", "DELETE", secretPath + "NOPE", "", 404, "VAULT_SECRET_NOT_FOUND"},
	}
	for _, tc := range refusals {
		t.Run(tc.name, func(t *testing.T) {
			code, b := raw(t, e, tc.method, tc.path, tc.body)
			var ae apiError
			_ = json.Unmarshal(b, &ae)
			if code != tc.status || ae.Code != tc.code {
				t.Fatalf("%d %s, want %d %s", code, b, tc.status, tc.code)
			}
			if bytes.Contains(b, []byte(realSecret)) || bytes.Contains(b, []byte(realSecret[:12])) {
				t.Fatalf("the error carries the value: %s", b)
			}
		})
	}

	// Name and description change; the secrets stay.
	var renamed wire.Vault
	e.Must(200, "PUT", "/api/v1/vaults/"+v.ID, map[string]any{"name": "gh", "description": "", "version": v.Version}, &renamed)
	if renamed.Name != "gh" || renamed.Version != v.Version+1 || len(renamed.Secrets) != 2 {
		t.Fatalf("renamed %+v", renamed)
	}

	// Agents name vaults that exist, each once, without two secrets of one
	// variable.
	var other wire.Vault
	e.Must(201, "POST", "/api/v1/vaults", map[string]any{"name": "other",
		"secrets": []map[string]any{{"name": "GH_TOKEN", "value": "v2", "host": "gitlab.test"}}}, &other)
	aid := e.Agent("auto", nil)
	agentBody := func(ids ...string) map[string]any {
		return map[string]any{"name": "coder", "runtime_profile": "test", "model": "fake-1", "vault_ids": ids}
	}
	for _, tc := range []struct {
		name   string
		ids    []string
		status int
		code   string
	}{
		{"an unknown vault", []string{"vlt_nope"}, 404, "VAULT_NOT_FOUND"},
		{"a vault twice", []string{v.ID, v.ID}, 400, "INVALID_REQUEST"},
		{"one variable in two vaults", []string{v.ID, other.ID}, 400, "INVALID_REQUEST"},
	} {
		var ae apiError
		if got := e.Call("PUT", "/api/v1/agents/"+aid, agentBody(tc.ids...), &ae); got != tc.status || ae.Code != tc.code {
			t.Errorf("%s: %d %+v, want %d %s", tc.name, got, ae, tc.status, tc.code)
		}
	}
	var a wire.Agent
	e.Must(200, "PUT", "/api/v1/agents/"+aid, agentBody(v.ID), &a)
	if len(a.VaultIDs) != 1 || a.VaultIDs[0] != v.ID {
		t.Fatalf("agent %+v", a)
	}

	// A vault an Agent names is not deleted.
	var ae apiError
	if got := e.Call("DELETE", "/api/v1/vaults/"+v.ID, nil, &ae); got != 409 || ae.Code != "VAULT_IN_USE" || !strings.Contains(ae.Message, aid) {
		t.Fatalf("delete a vault in use: %d %+v", got, ae)
	}
	e.Must(204, "DELETE", "/api/v1/vaults/"+v.ID+"/secrets/API_KEY", nil, nil)
	e.Must(200, "PUT", "/api/v1/agents/"+aid, agentBody(), &a)
	e.Must(204, "DELETE", "/api/v1/vaults/"+v.ID, nil, nil)
	e.Must(404, "GET", "/api/v1/vaults/"+v.ID, nil, nil)

	// At rest the values are sealed: the records hold no value, and
	// neither does any file of the database nor the server's log.
	left, err := st.GetVault(context.Background(), other.ID)
	if err != nil || len(left.Secrets) != 1 || !vault.IsSealed(left.Secrets[0].Sealed) {
		t.Fatalf("stored %+v %v", left, err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "astrabox.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(realSecret)) {
			t.Fatalf("%s holds a value in the clear", filepath.Base(f))
		}
	}
	if strings.Contains(logs.String(), realSecret) {
		t.Fatal("the server logged a value")
	}
}

// TestVaultKeyRotation: a restarted server re-seals vault secrets under a
// new first master key; they still open after the old key goes, and a
// sealed value moved to another secret does not open.
func TestVaultKeyRotation(t *testing.T) {
	h := newHarness(t)
	var v wire.Vault
	h.must(201, "POST", "/api/v1/vaults", map[string]any{"name": "keys", "secrets": []map[string]any{
		{"name": "A_KEY", "value": realSecret, "host": "a.test"}, {"name": "B_KEY", "value": "other-value", "host": "b.test"}}}, &v)

	newKey := make([]byte, 32)
	newKey[0] = 9
	rotated, err := vault.New(newKey, h.MasterKey)
	if err != nil {
		t.Fatal(err)
	}
	h.Ring = rotated
	h.restart()
	rec, err := h.Store.GetVault(context.Background(), v.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range rec.Secrets {
		if rotated.NeedsReseal(s.Sealed) {
			t.Fatalf("secret %s was not re-sealed under the newest master key", s.Name)
		}
	}
	only, _ := vault.New(newKey)
	h.Ring = only
	h.restart()
	got, err := h.Server.Catalog.OpenVaults(context.Background(), []string{v.ID})
	if err != nil || len(got) != 2 || got[0].Name != "A_KEY" || got[0].Value != realSecret || got[0].Host != "a.test" || got[0].Format != "Bearer {value}" {
		t.Fatalf("opened %d secrets, %v", len(got), err)
	}

	// A sealed value moved onto another secret's record does not open.
	rec.Secrets[1].Sealed = rec.Secrets[0].Sealed
	if err := h.Store.UpdateVault(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Server.Catalog.OpenVaults(context.Background(), []string{v.ID}); err == nil || strings.Contains(err.Error(), realSecret) {
		t.Fatalf("a moved sealed value opened (or the error holds it): %v", err)
	}
}

// TestVaultWithoutEgress: a Session whose Agent has vaults, on a server
// without the egress proxy, fails to start with
// PROTECTED_DELIVERY_UNSUPPORTED instead of running without (or leaking)
// its secrets.
func TestVaultWithoutEgress(t *testing.T) {
	h := newHarness(t, fakemodel.Text("never"))
	var v wire.Vault
	h.must(201, "POST", "/api/v1/vaults", map[string]any{"name": "k", "secrets": []map[string]any{{"name": "TOKEN", "value": realSecret, "host": "api.test"}}}, &v)
	aid := h.agent("auto", nil)
	h.must(200, "PUT", "/api/v1/agents/"+aid, map[string]any{"name": "coder", "runtime_profile": "test", "model": "fake-1", "vault_ids": []string{v.ID}}, nil)
	sid := h.session(aid)
	rc := h.send(sid, "hi", "")
	evs := h.events(sid, 0, untilTurnEnded(rc.InputID))
	var failure map[string]any
	for _, f := range frames(evs) {
		if f["type"] == "data-turn-failure" {
			failure, _ = f["data"].(map[string]any)
		}
	}
	if failure == nil || failure["code"] != "PROTECTED_DELIVERY_UNSUPPORTED" {
		t.Fatalf("the turn failed with %v, want PROTECTED_DELIVERY_UNSUPPORTED: %s", failure, summarize(evs))
	}
	b, _ := json.Marshal(evs)
	if bytes.Contains(b, []byte(realSecret)) {
		t.Fatal("the log holds the value")
	}
	if n := len(h.model.Requests()); n != 0 {
		t.Fatalf("the program ran anyway: %d model requests", n)
	}
}
