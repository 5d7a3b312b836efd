package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/egresstest"
	"github.com/astrabox/astrabox/egress/trust"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/store/sqlite"
)

// syncBuffer is a buffer many goroutines write (loggers).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestProtectedDeliveryEndToEnd is protected delivery on the native and
// docker backends: an Agent with a vault, on a profile of network
// unrestricted, runs a shell tool that sends the secret's placeholder to
// the secret's host over HTTPS (through the box's trust bundle, no flag)
// and to another host; the first gets the real value, the other the
// placeholder. The real value is nowhere in the box (environment, files,
// every process's /proc environ, cmdline and memory, the proxy's refusal
// pages), nor in the server's log, the Session's log or the database.
// After a restart the re-attached runtime's secrets are delivered again.
// Needs root; the hosts are servers in a network namespace the test makes.
func TestProtectedDeliveryEndToEnd(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "iptables")
	for _, backend := range []string{"native", "docker"} {
		t.Run(backend, func(t *testing.T) { protectedDelivery(t, backend) })
	}
}

// deliveryTool is the agent's shell tool: python3 (in both backends'
// images) calls the secret's host and another over HTTPS, the first with
// the box's default trust (SSL_CERT_FILE), the other with the upstream's
// CA alone, then the other over HTTP; each with the placeholder.
const deliveryTool = `python3 - <<'EOF'
import os, ssl, urllib.request
tok = os.environ["API_TOKEN"]
def get(url, cafile=None):
    ctx = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    req = urllib.request.Request(url, headers={"Authorization": "Bearer " + tok})
    try:
        print(urllib.request.urlopen(req, timeout=10, context=ctx).read().decode().strip())
    except Exception as e:
        print("error", url, e)
get("https://api.vault.test/v1/repos")
get("https://other.vault.test/v1/repos", "/tmp/up-ca.pem")
get("http://other.vault.test/plain")
EOF`

// refusalProbe sends the placeholder over plain HTTP to address %s with
// Host %s and prints what comes back: the proxy's refusal page.
const refusalProbe = `python3 - <<'EOF'
import os, socket
s = socket.create_connection(("%s", 80), timeout=8)
s.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer " + os.environ["API_TOKEN"] + "\r\nConnection: close\r\n\r\n").encode())
s.settimeout(8)
out = b""
while True:
    try:
        b = s.recv(4096)
    except OSError:
        break
    if not b:
        break
    out += b
print(out.decode(errors="replace"))
EOF`

func protectedDelivery(t *testing.T, backend string) {
	up := egresstest.NewUpstream(t)
	res := egresstest.NewResolver()
	res.Set("api.vault.test", up.Addr)
	res.Set("other.vault.test", up.Addr)
	ca, _, err := trust.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	m := egress.NewManager(egress.Config{Resolver: res, CA: ca, RootCAs: up.Roots,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	t.Cleanup(m.Close)
	dbDir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dbDir, "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	const tool = deliveryTool
	e := servertest.New(t, servertest.Options{Backend: backend, Egress: m, Store: st, LogTo: logs, Script: []fakemodel.Reply{
		fakemodel.Call("shell", map[string]any{"command": tool}), fakemodel.Text("Called both."),
		fakemodel.Call("shell", map[string]any{"command": tool}), fakemodel.Text("Called both again."),
	}})
	h := &harness{Env: e, t: t, model: e.Model}

	var v wire.Vault
	h.must(201, "POST", "/api/v1/vaults", map[string]any{"name": "ci", "secrets": []map[string]any{
		{"name": "API_TOKEN", "value": realSecret, "host": "api.vault.test", "path_prefix": "/v1"}}}, &v)
	aid := h.agent("auto", map[string]any{"network": "unrestricted"})
	h.must(200, "PUT", "/api/v1/agents/"+aid, map[string]any{"name": "coder", "runtime_profile": "test", "model": "fake-1",
		"vault_ids": []string{v.ID}}, nil)
	sid := h.session(aid)
	sess := h.waitState(sid, "READY")
	boxID, _ := sess["sandbox_id"].(string)
	ctx := context.Background()
	ex, err := client.New(e.URL, servertest.Key).Execd(ctx, boxID)
	if err != nil {
		t.Fatal(err)
	}
	run := func(cmd string) string {
		t.Helper()
		out, err := ex.Run(ctx, execdwire.RunCommandRequest{Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		return string(out.Stdout) + string(out.Stderr)
	}
	if err := ex.WriteFile(ctx, "/tmp/up-ca.pem", up.CAPEM, 644); err != nil {
		t.Fatal(err)
	}
	envOut := run(`printf '%s|%s|%s|%s|%s\n' "$API_TOKEN" "$SSL_CERT_FILE" "$NODE_EXTRA_CA_CERTS" "$REQUESTS_CA_BUNDLE" "$CURL_CA_BUNDLE"`)
	f := strings.Split(strings.TrimSpace(envOut), "|")
	if len(f) != 5 || !strings.HasPrefix(f[0], "abx-secret-") || f[1] == "" || f[2] == "" || f[3] != f[1] || f[4] != f[1] {
		t.Fatalf("the box's environment: %q", envOut)
	}
	placeholder := f[0]
	if bundle := run("cat " + f[1]); !strings.Contains(bundle, string(bytes.TrimSpace(ca.CertPEM()))) || strings.Count(bundle, "BEGIN CERTIFICATE") < 2 {
		t.Fatalf("the trust bundle lacks the egress CA or the box's own roots (%d certificates)", strings.Count(bundle, "BEGIN CERTIFICATE"))
	}
	var wp egress.WirePolicy
	h.must(200, "GET", "/v1/sandboxes/"+boxID+"/network-policy", nil, &wp)
	if wp.DefaultAction != "allow" {
		t.Fatalf("the box of an unrestricted profile has policy %+v, want limited with defaultAction allow", wp)
	}

	// The agent's tool calls both hosts with the placeholder.
	checkTurn := func(after int64, rc receipt) []logEvent {
		t.Helper()
		evs := h.events(sid, after, untilTurnEnded(rc.InputID))
		var shell string
		for _, f := range frames(evs) {
			if f["type"] == "tool-output-available" {
				b, _ := json.Marshal(f["output"])
				shell += string(b)
			}
		}
		if !strings.Contains(shell, "ok api.vault.test") || strings.Count(shell, "ok other.vault.test") != 2 {
			t.Fatalf("the tool's output: %s", shell)
		}
		var got []string
		for _, r := range up.Requests() {
			got = append(got, fmt.Sprintf("%s tls=%v %q", r.Host, r.TLS, r.Authorization))
		}
		secretHost, ok := up.Last("api.vault.test")
		if !ok || !secretHost.TLS || secretHost.Authorization != "Bearer "+realSecret {
			t.Fatalf("the secret's host did not get the real value over HTTPS: %v", got)
		}
		n := 0
		for _, r := range up.Requests() {
			if r.Host == "other.vault.test" {
				n++
				if r.Authorization != "Bearer "+placeholder {
					t.Fatalf("another host got %q, want the placeholder: %v", r.Authorization, got)
				}
			}
		}
		if n < 2 {
			t.Fatalf("other.vault.test saw %d requests: %v", n, got)
		}
		return evs
	}
	rc := h.send(sid, "call the APIs", "c1")
	evs := checkTurn(0, rc)

	// Nowhere in the box, nor in the proxy's refusal pages.
	for _, dest := range [][2]string{{"169.254.169.254", "169.254.169.254"}, {up.Addr.String(), "unknown.test"}} {
		if page := run(fmt.Sprintf(refusalProbe, dest[0], dest[1])); !strings.Contains(page, "AstraBox egress") || strings.Contains(page, realSecret) {
			t.Fatalf("refusal page of %s (Host %s): %q", dest[0], dest[1], page)
		}
	}
	scan := run(egresstest.ScanScript(realSecret))
	if !egresstest.ScanClean(scan) {
		t.Fatalf("scan of the box for the real value: %s", scan)
	}

	// The server restarts; the re-attached runtime gets its secrets
	// again (they are cleared here to see it).
	m.Box(boxID).SetSecrets(nil)
	h.restart()
	rc2 := h.send(sid, "again", "c2")
	evs = append(evs, checkTurn(evs[len(evs)-1].Seq, rc2)...)
	if s := h.waitState(sid, "READY"); s["sandbox_id"] != boxID {
		t.Fatalf("the runtime was rebuilt (sandbox %v), not re-attached to %s", s["sandbox_id"], boxID)
	}

	// Not in the Session's log, the model's requests, the server's log or
	// the database.
	b, _ := json.Marshal(evs)
	if bytes.Contains(b, []byte(realSecret)) {
		t.Fatal("the Session's log holds the real value")
	}
	for _, r := range h.model.Requests() {
		if strings.Contains(r.Transcript(), realSecret) {
			t.Fatal("a model request holds the real value")
		}
	}
	if strings.Contains(logs.String(), realSecret) {
		t.Fatal("the server logged the real value")
	}
	if !strings.Contains(logs.String(), "egress delivered secrets") {
		t.Error("the proxy did not log the delivery (by name)")
	}
	files, _ := filepath.Glob(filepath.Join(dbDir, "astrabox.db*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(realSecret)) {
			t.Fatalf("%s holds the real value", filepath.Base(f))
		}
	}
}
