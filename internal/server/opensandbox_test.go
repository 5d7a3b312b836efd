package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/provider/opensandbox"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// remoteBackend is the name the outer server gives its remote.
const remoteBackend = "rem"

// TestOpenSandboxBackend runs two `astrabox serve` processes (root): the
// remote, with its native backend, and the outer one, with the native
// backend and the remote as its opensandbox backend "rem" (the default).
func TestOpenSandboxBackend(t *testing.T) {
	remote := newServeProcess(t)
	remote.start()
	cfg, err := json.Marshal(map[string]any{
		"backends": []string{"native", remoteBackend}, "defaultBackend": remoteBackend,
		"opensandbox": map[string]any{remoteBackend: map[string]any{"url": "http://" + remote.addr, "apiKey": servertest.Key}},
		"replicas":    map[string]any{"reconcileInterval": 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "outer.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	outer := newServeProcess(t, "--config", cfgPath)
	outer.start()
	outerURL, remoteURL := "http://"+outer.addr, "http://"+remote.addr
	oc, rc := client.New(outerURL, servertest.Key), client.New(remoteURL, servertest.Key)
	waitReady(t, outerURL, func(b map[string]sandbox.Health) bool { return b[remoteBackend].Status == sandbox.Healthy })

	// The conformance suite through the outer server: a Provider of this
	// package on the outer server, whose boxes go to its remote backend.
	t.Run("Conformance", func(t *testing.T) {
		pcfg := opensandbox.Config{Name: "outer", URL: outerURL, APIKey: servertest.Key, Owner: "conformance", Backend: remoteBackend}
		sandboxtest.Run(t, outerHarness{p: openProvider(t, pcfg), cfg: pcfg})
	})

	// The remote going away makes only its backend unready, and it comes
	// back by itself.
	t.Run("Readyz", func(t *testing.T) {
		remote.stop()
		b := waitReady(t, outerURL, func(b map[string]sandbox.Health) bool { return b[remoteBackend].Status == sandbox.Unhealthy })
		if b["native"].Status != sandbox.Healthy {
			t.Fatalf("the native backend with the remote down: %+v", b["native"])
		}
		if !strings.Contains(b[remoteBackend].Reason, remoteBackend) {
			t.Errorf("the reason does not name the remote: %q", b[remoteBackend].Reason)
		}
		remote.start()
		waitReady(t, outerURL, func(b map[string]sandbox.Health) bool { return b[remoteBackend].Status == sandbox.Healthy })
	})

	// A box deleted on the remote directly is seen as lost.
	t.Run("LostBox", func(t *testing.T) {
		ctx := ctxFor(t, 2*time.Minute)
		sb := createOn(t, oc, remoteBackend)
		rid := remoteID(t, rc, sb.ID)
		if err := rc.Delete(ctx, rid); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "the outer server to see the box lost", func() bool {
			got, err := oc.Get(ctx, sb.ID)
			return err == nil && got.Status.State == string(sandbox.StateFailed) && got.Status.Reason == "box_lost"
		})
		if err := oc.Delete(ctx, sb.ID); err != nil && client.CodeOf(err) != sandbox.CodeSandboxNotFound {
			t.Fatalf("delete the lost box: %v", err)
		}
	})

	// A restart of the outer server re-attaches to its remote boxes; a
	// renewal reaches the remote; a delete removes the remote box.
	t.Run("RestartReattach", func(t *testing.T) {
		ctx := ctxFor(t, 3*time.Minute)
		sb := createOn(t, oc, remoteBackend)
		run(t, oc, sb.ID, "echo before > mark")
		outer.stop()
		outer.start()
		if got, err := oc.Get(ctx, sb.ID); err != nil || got.Status.State != string(sandbox.StateRunning) {
			t.Fatalf("after the restart: %+v, %v", got, err)
		}
		if out := run(t, oc, sb.ID, "cat mark"); out != "before\n" {
			t.Fatalf("the file written before the restart reads %q", out)
		}
		at := time.Now().Add(2 * time.Hour).Truncate(time.Second)
		if _, err := oc.Renew(ctx, sb.ID, at, client.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		rsb, err := rc.Get(ctx, remoteID(t, rc, sb.ID))
		if err != nil || rsb.ExpiresAt == nil || rsb.ExpiresAt.Before(at) {
			t.Fatalf("the remote's box after a renewal to %s: %+v, %v", at, rsb, err)
		}
		if err := oc.Delete(ctx, sb.ID); err != nil {
			t.Fatal(err)
		}
		if l, err := rc.List(ctx, client.ListOptions{Metadata: map[string]string{opensandbox.LabelID: sb.ID}}); err != nil || len(l.Items) != 0 {
			t.Fatalf("the remote still has the deleted box: %+v, %v", l, err)
		}
	})

	// A Session of the platform runs on the remote backend.
	t.Run("Session", func(t *testing.T) {
		model := fakemodel.New(t, fakemodel.Call("shell", map[string]any{"command": "echo from-the-remote"}),
			fakemodel.Text("done on the remote")).WithKey(servertest.ModelKey)
		h := &harness{Env: servertest.Attach(t, outerURL, remoteBackend, model), t: t, model: model}
		sid := h.session(h.agent("auto", nil))
		rc0 := h.send(sid, "go", "")
		evs := h.events(sid, 0, untilTurnEnded(rc0.InputID))
		var text, tool strings.Builder
		for _, f := range frames(evs) {
			switch f["type"] {
			case "text-delta":
				text.WriteString(f["delta"].(string))
			case "tool-output-available":
				b, _ := json.Marshal(f["output"])
				tool.Write(b)
			}
		}
		if text.String() != "done on the remote" || !strings.Contains(tool.String(), "from-the-remote") {
			t.Fatalf("text %q, tool output %s", text.String(), tool.String())
		}
		l, err := oc.List(ctxFor(t, time.Minute), client.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		on := 0
		for _, sb := range l.Items {
			if sb.Backend == remoteBackend {
				on++
			}
		}
		if on == 0 {
			t.Fatalf("no sandbox of the outer server is on %s: %+v", remoteBackend, l.Items)
		}
		h.waitState(sid, "READY")
		h.must(204, "DELETE", "/api/v1/sessions/"+sid, nil, nil)
	})
}

// outerHarness is the conformance harness of a Provider on the outer
// server.
type outerHarness struct {
	p   *opensandbox.Provider
	cfg opensandbox.Config
}

func (h outerHarness) Provider() sandbox.Provider { return h.p }
func (h outerHarness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 3 << 30, DiskBytes: 2 << 30}}
}
func (h outerHarness) Reopen(t *testing.T) sandbox.Provider { return openProvider(t, h.cfg) }

// openProvider returns a Provider on cfg once its server answers its
// probe; it is closed when t ends.
func openProvider(t *testing.T, cfg opensandbox.Config) *opensandbox.Provider {
	t.Helper()
	p, err := opensandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	eventually(t, 30*time.Second, "the server to answer the probe", func() bool {
		return p.Health(ctxFor(t, 10*time.Second)).Status == sandbox.Healthy
	})
	return p
}

// waitReady polls the server's /readyz (with the key) until ok accepts
// its backends, and returns them.
func waitReady(t *testing.T, url string, ok func(map[string]sandbox.Health) bool) map[string]sandbox.Health {
	t.Helper()
	var last map[string]sandbox.Health
	eventually(t, 60*time.Second, "readyz to show the backends as wanted", func() bool {
		req, _ := http.NewRequest(http.MethodGet, url+"/readyz", nil)
		req.Header.Set(api.HeaderAPIKey, servertest.Key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var body struct {
			Ready    bool                      `json:"ready"`
			Backends map[string]sandbox.Health `json:"backends"`
		}
		if json.NewDecoder(resp.Body).Decode(&body) != nil {
			return false
		}
		last = body.Backends
		allHealthy := true
		for _, h := range body.Backends {
			allHealthy = allHealthy && h.Status == sandbox.Healthy
		}
		return ok(body.Backends) && body.Ready == allHealthy && (resp.StatusCode == http.StatusOK) == allHealthy
	})
	return last
}

// createOn creates a box of image host on backend through c.
func createOn(t *testing.T, c *client.Client, backend string) *wire.Sandbox {
	t.Helper()
	timeout := int64(600)
	sb, err := c.Create(ctxFor(t, 2*time.Minute), wire.CreateSandboxRequest{Image: &wire.ImageSpec{URI: "host"}, Timeout: &timeout, Backend: backend}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Backend != backend || sb.Status.State != string(sandbox.StateRunning) {
		t.Fatalf("created %+v, want Running on %s", sb, backend)
	}
	return sb
}

// remoteID is the remote's id of the outer server's box id.
func remoteID(t *testing.T, rc *client.Client, id string) string {
	t.Helper()
	l, err := rc.List(ctxFor(t, time.Minute), client.ListOptions{Metadata: map[string]string{opensandbox.LabelID: id}})
	if err != nil || len(l.Items) != 1 {
		t.Fatalf("the remote's boxes labelled %s: %+v, %v", id, l, err)
	}
	return l.Items[0].ID
}

// run runs a shell command in box id through c's execd endpoint and
// returns its stdout.
func run(t *testing.T, c *client.Client, id, command string) string {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	ec, err := c.Execd(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := ec.Run(ctx, execdwire.RunCommandRequest{Command: command})
	if err != nil || ex.ExitCode != 0 {
		t.Fatalf("run %q: %+v, %v", command, ex, err)
	}
	return string(ex.Stdout)
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// eventually polls cond until it holds or d passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
