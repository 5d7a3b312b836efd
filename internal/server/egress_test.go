package server_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/egresstest"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// TestNetworkPolicyThroughTheAPI creates a box with OpenSandbox's
// networkPolicy on the native backend, changes its rules with the egress
// API on port 18080 of its endpoint (as the SDKs do: the endpoint's
// headers, not the API key) and with the operator's route, and checks
// what the box reaches each time. Needs root.
func TestNetworkPolicyThroughTheAPI(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "iptables")
	testenv.NeedCommand(t, "curl")
	up := egresstest.NewUpstream(t)
	res := egresstest.NewResolver()
	res.Set("allowed.test", up.Addr)
	res.Set("later.test", up.Addr)
	m := egress.NewManager(egress.Config{Resolver: res, Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	e := servertest.New(t, servertest.Options{Backend: "native", Egress: m})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New(e.URL, servertest.Key)
	timeout := int64(600)
	sb, err := c.Create(ctx, wire.CreateSandboxRequest{Timeout: &timeout, Entrypoint: []string{"sleep", "infinity"},
		NetworkPolicy: &wire.NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{{Action: "allow", Target: "allowed.test"}}}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(context.Background(), sb.ID) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got, err := c.Get(ctx, sb.ID)
		if err == nil && got.Status.State == "Running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox not running: %+v %v", got, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	box, err := c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	get := func(url string) string {
		t.Helper()
		ex, err := box.Run(ctx, execdwire.RunCommandRequest{Command: "curl -s -m 8 -w ' code=%{http_code}' " + url})
		if err != nil {
			t.Fatal(err)
		}
		return strings.Join(strings.Fields(string(ex.Stdout)), " ")
	}
	if got := get("http://allowed.test/"); got != "ok allowed.test code=200" {
		t.Fatalf("allowed.test: %q", got)
	}
	if got := get("http://later.test/"); strings.Contains(got, "ok later.test") {
		t.Fatalf("later.test before the change: %q", got)
	}

	// The egress API, as the SDKs reach it: the endpoint of port 18080
	// with the headers it names.
	ep, err := c.Endpoint(ctx, sb.ID, egress.InBoxAPIPort)
	if err != nil {
		t.Fatal(err)
	}
	egressCall := func(method, body string, headers map[string]string) (int, string) {
		req, _ := http.NewRequest(method, "http://"+ep.Endpoint+"/policy", strings.NewReader(body))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := egressCall("PATCH", `[{"action":"allow","target":"later.test"}]`, nil); code != http.StatusUnauthorized {
		t.Fatalf("PATCH without the endpoint's headers: %d", code)
	}
	code, body := egressCall("PATCH", `[{"action":"allow","target":"later.test"}]`, ep.Headers)
	if code != 200 || !strings.Contains(body, `"status":"ok"`) {
		t.Fatalf("PATCH /policy: %d %s", code, body)
	}
	if got := get("http://later.test/"); got != "ok later.test code=200" {
		t.Fatalf("later.test after PATCH, without a restart: %q", got)
	}
	code, body = egressCall("GET", "", ep.Headers)
	var st egress.PolicyStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil || st.Policy == nil || st.Mode != "deny_all" ||
		len(st.Policy.Egress) != 2 || st.Policy.Egress[0].Target != "later.test" {
		t.Fatalf("GET /policy: %d %s", code, body)
	}
	if code, body := egressCall("PATCH", `[{"action":"allow","target":"not a name"}]`, ep.Headers); code != 400 {
		t.Fatalf("PATCH of a bad target: %d %s", code, body)
	}
	code, _ = egressCall("DELETE", `["later.test"]`, ep.Headers)
	if code != 200 {
		t.Fatalf("DELETE /policy: %d", code)
	}
	if got := get("http://later.test/"); strings.Contains(got, "ok later.test") {
		t.Fatalf("later.test after DELETE: %q", got)
	}

	// The operator's route: the same policy, changed with the API key.
	var wp egress.WirePolicy
	e.Must(200, "PATCH", "/v1/sandboxes/"+sb.ID+"/network-policy", []map[string]string{{"action": "deny", "target": "allowed.test"}}, &wp, api.HeaderAPIKey, servertest.Key)
	if len(wp.Egress) != 1 || wp.Egress[0].Action != "deny" { // it replaced the allow rule of the same target
		t.Fatalf("operator PATCH: %+v", wp)
	}
	if got := get("http://allowed.test/"); strings.Contains(got, "ok allowed.test") {
		t.Fatalf("allowed.test after the operator denied it: %q", got)
	}
	e.Must(200, "GET", "/v1/sandboxes/"+sb.ID+"/network-policy", nil, &wp, api.HeaderAPIKey, servertest.Key)
	if wp.DefaultAction != "deny" || len(wp.Egress) != 1 {
		t.Fatalf("operator GET: %+v", wp)
	}
}
