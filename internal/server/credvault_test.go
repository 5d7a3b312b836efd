package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/egresstest"
	"github.com/astrabox/astrabox/egress/trust"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// The values of TestCredentialVaultEndToEnd: none may show anywhere but
// in the requests to their destinations.
const (
	vaultToken  = "vault-token-FIRST-5b1c0d9e8f7a"
	vaultToken2 = "vault-token-SECOND-0a9b8c7d6e5f"
	vaultAPIKey = "vault-apikey-3e4f5a6b7c8d9e0f"
)

// TestCredentialVaultEndToEnd is OpenSandbox's Credential Vault on the
// native and docker backends: a sandbox created with credentialProxy and
// a default-allow networkPolicy gets a vault through its egress API (the
// endpoint of port 18080 and its headers), whose bindings put a bearer
// token into HTTPS requests and an API key into HTTP requests to their
// destination only: other paths, methods and hosts get nothing. Inside the
// box the vault cannot be read or written, and no value is in the box,
// the proxy's refusal pages, the server's log or the database. A mutation
// takes effect at once; after a restart with a new egress proxy (as a new
// server process has) the sealed vault is applied again; deleting the
// sandbox deletes its vault. Needs root; the hosts are servers in a network
// namespace the test makes.
func TestCredentialVaultEndToEnd(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "iptables")
	for _, backend := range []string{"native", "docker"} {
		t.Run(backend, func(t *testing.T) { credentialVault(t, backend) })
	}
}

// fetchScript is the box's HTTP client (python3, in both backends'
// images): fetch.py METHOD URL [-H 'Name: value']... [--cacert FILE]
// [--connect ADDRESS] prints the body and " code=<status>", or "error
// ...". HTTPS verifies with the box's default trust (SSL_CERT_FILE) unless
// --cacert names another bundle; --connect sends a plain HTTP request to
// ADDRESS with the URL's host as Host.
const fetchScript = `import http.client, ssl, sys, urllib.parse
method, url, args = sys.argv[1], sys.argv[2], sys.argv[3:]
headers, cafile, connect = {}, None, None
while args:
    flag, val, args = args[0], args[1], args[2:]
    if flag == "-H":
        k, v = val.split(":", 1)
        headers[k.strip()] = v.strip()
    elif flag == "--cacert":
        cafile = val
    elif flag == "--connect":
        connect = val
u = urllib.parse.urlsplit(url)
try:
    if u.scheme == "https":
        c = http.client.HTTPSConnection(u.hostname, u.port or 443, timeout=10, context=ssl.create_default_context(cafile=cafile))
    else:
        c = http.client.HTTPConnection(connect or u.hostname, u.port or 80, timeout=10)
        headers.setdefault("Host", u.hostname)
    c.request(method, (u.path or "/") + ("?" + u.query if u.query else ""), headers=headers)
    r = c.getresponse()
    print(r.read().decode(errors="replace").strip(), "code=%d" % r.status)
except Exception as e:
    print("error", e)
`

func credentialVault(t *testing.T, backend string) {
	up := egresstest.NewUpstream(t)
	res := egresstest.NewResolver()
	res.Set("vault.test", up.Addr)
	res.Set("other.test", up.Addr)
	ca, _, err := trust.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	newManager := func() *egress.Manager {
		m := egress.NewManager(egress.Config{Resolver: res, CA: ca, RootCAs: up.Roots,
			Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		t.Cleanup(m.Close)
		return m
	}
	dbDir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dbDir, "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := servertest.New(t, servertest.Options{Backend: backend, Egress: newManager(), Store: st, LogTo: logs, Rootfs: os.Getenv("ASTRABOX_TEST_ROOTFS")})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := client.New(e.URL, servertest.Key)
	timeout := int64(600)
	// The entrypoint notes whether the trust bundle was there when it
	// started.
	entrypoint := []string{"sh", "-c", "if [ -s " + trust.BundlePath + " ]; then echo yes; else echo no; fi >/tmp/trust-at-start; exec sleep infinity"}
	req := wire.CreateSandboxRequest{Timeout: &timeout, Entrypoint: entrypoint,
		NetworkPolicy:   &wire.NetworkPolicy{DefaultAction: "allow", Egress: []wire.NetworkRule{{Action: "allow", Target: "vault.test"}}},
		CredentialProxy: &wire.CredentialProxyConfig{Enabled: true}}
	if e.Image != "" {
		req.Image = &wire.ImageSpec{URI: e.Image}
	}
	sb, err := c.Create(ctx, req, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(context.Background(), sb.ID) }()
	waitRunning(t, ctx, c, sb.ID)

	vaultCall := func(method, path, body string) (int, string) {
		t.Helper()
		ep, err := c.Endpoint(ctx, sb.ID, egress.InBoxAPIPort)
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(method, "http://"+ep.Endpoint+path, strings.NewReader(body))
		for k, v := range ep.Headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for _, v := range []string{vaultToken, vaultToken2, vaultAPIKey} {
			if strings.Contains(string(b), v) {
				t.Fatalf("%s %s answered a value: %s", method, path, b)
			}
		}
		return resp.StatusCode, string(b)
	}
	code, body := vaultCall("POST", "/credential-vault", `{
		"credentials": [{"name": "tok", "source": {"type": "inline", "value": "`+vaultToken+`"}},
		                {"name": "key", "source": {"type": "inline", "value": "`+vaultAPIKey+`"}}],
		"bindings": [
			{"name": "https-bearer", "match": {"hosts": ["vault.test"], "paths": ["/api/*"]}, "auth": {"type": "bearer", "credential": "tok"}},
			{"name": "http-key", "match": {"schemes": ["http"], "ports": [80], "hosts": ["vault.test"], "methods": ["GET"], "paths": ["/plain"]},
			 "auth": {"type": "apiKey", "name": "X-Api-Key", "credential": "key"}}]}`)
	if code != http.StatusCreated || !strings.Contains(body, `"revision":1`) {
		t.Fatalf("create the vault: %d %s", code, body)
	}

	ex, err := c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := ex.Run(ctx, execdwire.RunCommandRequest{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(out.Stdout)+" "+string(out.Stderr)), " ")
	}
	for name, b := range map[string][]byte{"/tmp/up-ca.pem": up.CAPEM, "/tmp/fetch.py": []byte(fetchScript)} {
		if err := ex.WriteFile(ctx, name, b, 644); err != nil {
			t.Fatal(err)
		}
	}
	// The bundle was in place before the entrypoint started.
	for i := 0; ; i++ {
		if got := run("cat /tmp/trust-at-start 2>/dev/null"); got == "yes" {
			break
		} else if got == "no" || i == 50 {
			t.Fatalf("the entrypoint found the trust bundle at its start: %q", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The box trusts the egress CA by default (its bundle and variables).
	env := run(`printf '%s|%s|%s' "$SSL_CERT_FILE" "$CURL_CA_BUNDLE" "$NODE_EXTRA_CA_CERTS"`)
	if env != trust.BundlePath+"|"+trust.BundlePath+"|"+trust.CAPath {
		t.Fatalf("the box's trust variables: %q", env)
	}
	if bundle := run("cat " + trust.BundlePath); !strings.Contains(bundle, strings.Join(strings.Fields(string(ca.CertPEM())), " ")) {
		t.Fatal("the box's trust bundle lacks the egress CA")
	}
	fetch := func(args string) string {
		t.Helper()
		out := run("python3 /tmp/fetch.py " + args)
		for _, v := range []string{vaultToken, vaultToken2, vaultAPIKey} {
			if strings.Contains(out, v) {
				t.Fatalf("fetch %s: a value reached the box: %s", args, out)
			}
		}
		return out
	}
	// expect fetches in the box and checks what the host saw.
	expect := func(args, host string, tls bool, auth, apiKey string) {
		t.Helper()
		if out := fetch(args); !strings.Contains(out, "ok "+host+" code=200") {
			t.Fatalf("fetch %s: %s", args, out)
		}
		got, ok := up.Last(host)
		if !ok || got.TLS != tls || got.Authorization != auth || got.APIKey != apiKey {
			t.Fatalf("fetch %s: the upstream saw %+v, want TLS %v, Authorization %q, X-Api-Key %q", args, got, tls, auth, apiKey)
		}
	}
	expect("GET https://vault.test/api/v1", "vault.test", true, "Bearer "+vaultToken, "")
	expect("GET https://vault.test/api/v1 -H 'Authorization: Bearer mine'", "vault.test", true, "Bearer "+vaultToken, "")
	expect("GET https://vault.test/other -H 'Authorization: Bearer mine'", "vault.test", true, "Bearer mine", "")
	expect("GET http://vault.test/plain", "vault.test", false, "", vaultAPIKey)
	expect("POST http://vault.test/plain", "vault.test", false, "", "")
	expect("GET http://vault.test/api/v1", "vault.test", false, "", "") // the bearer binding is https only
	expect("GET http://other.test/plain", "other.test", false, "", "")
	expect("GET https://other.test/api/v1 --cacert /tmp/up-ca.pem", "other.test", true, "", "") // not intercepted
	// A destination that echoes the request: the box reads the echo
	// without the value (fetch checks), the bound header withheld.
	for _, args := range []string{"GET https://vault.test/api/v1?echo=1", "GET http://vault.test/plain?echo=1"} {
		if out := fetch(args); !strings.Contains(out, "echo ") || !strings.Contains(out, "[credential withheld by AstraBox]") || !strings.Contains(out, "code=200") {
			t.Fatalf("fetch %s from an echoing destination: %s", args, out)
		}
	}
	// A refusal page names no value.
	if out := fetch("GET http://nope.test/plain --connect " + up.Addr.String()); !strings.Contains(out, "code=403") {
		t.Fatalf("refused request: %s", out)
	}
	// From inside the box the vault is neither readable nor writable.
	gw := run(`python3 -c 'import socket, struct
for l in open("/proc/net/route").read().splitlines()[1:]:
    f = l.split()
    if f[1] == "00000000": print(socket.inet_ntoa(struct.pack("<I", int(f[2], 16))))'`)
	for _, args := range []string{"GET http://%s:18080/credential-vault", "GET http://%s:18080/credential-vault/credentials",
		"PATCH http://%s:18080/credential-vault", "DELETE http://%s:18080/credential-vault"} {
		if out := fetch(fmt.Sprintf(args, gw)); !strings.Contains(out, "code=403") {
			t.Fatalf("in-box %s: %s", args, out)
		}
	}

	// A mutation applies at once: the token replaced, the API key's
	// binding gone.
	code, body = vaultCall("PATCH", "/credential-vault", `{"expectedRevision": 1,
		"credentials": {"replace": [{"name": "tok", "source": {"type": "inline", "value": "`+vaultToken2+`"}}], "delete": ["key"]},
		"bindings": {"delete": ["http-key"]}}`)
	if code != http.StatusOK || !strings.Contains(body, `"revision":2`) {
		t.Fatalf("patch the vault: %d %s", code, body)
	}
	expect("GET https://vault.test/api/v1", "vault.test", true, "Bearer "+vaultToken2, "")
	expect("GET http://vault.test/plain", "vault.test", false, "", "")

	// No value anywhere in the box.
	for _, v := range []string{vaultToken, vaultToken2, vaultAPIKey} {
		if scan := run(egresstest.ScanScript(v)); !egresstest.ScanClean(scan) {
			t.Fatalf("scan of the box: %s", scan)
		}
	}

	// A new server process: the egress proxy starts empty, the vault is
	// read from the store and applied again.
	e.RestartBackend(newManager())
	c = client.New(e.URL, servertest.Key)
	if ex, err = c.Execd(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	expect("GET https://vault.test/api/v1", "vault.test", true, "Bearer "+vaultToken2, "")
	if code, body := vaultCall("GET", "/credential-vault", ""); code != 200 || !strings.Contains(body, `"revision":2`) || !strings.Contains(body, `"https-bearer"`) {
		t.Fatalf("the vault after a restart: %d %s", code, body)
	}

	// Neither the log nor the database holds a value.
	if l := logs.String(); strings.Contains(l, vaultToken) || strings.Contains(l, vaultToken2) || strings.Contains(l, vaultAPIKey) {
		t.Fatal("the server logged a value")
	} else if !strings.Contains(l, "egress applied credential binding") {
		t.Error("the proxy did not log the bindings it applied (by name)")
	}
	files, _ := filepath.Glob(filepath.Join(dbDir, "astrabox.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []string{vaultToken, vaultToken2, vaultAPIKey} {
			if bytes.Contains(b, []byte(v)) {
				t.Fatalf("%s holds a value", filepath.Base(f))
			}
		}
	}

	// The vault goes with the sandbox.
	if err := c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetSandboxVault(ctx, sb.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the vault of a deleted sandbox: %v", err)
	}
}

// waitRunning waits until sandbox id is Running.
func waitRunning(t *testing.T, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := c.Get(ctx, id)
		if err == nil && got.Status.State == "Running" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox not running: %+v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
