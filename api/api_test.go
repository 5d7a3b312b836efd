package api_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/app"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// TestMain lets the test binary serve as astrabox for the process
// harness's execd.
func TestMain(m *testing.M) {
	if os.Getenv("ASTRABOX_TEST_MAIN") == "1" {
		ctx, stop := app.SignalContext(context.Background())
		code := app.Main(ctx, os.Args[1:], app.IO{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}, app.OSEnv)
		stop()
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const testKey = "test-key"

type env struct {
	srv *httptest.Server
	c   *client.Client
	svc *lifecycle.Service
	p   *process.Provider
	// n is the server's notifier, for replicas on the same store.
	n *recordingNotifier
	// handler is the API server.
	handler *api.Server
}

func newEnv(t *testing.T, max int) *env {
	t.Helper()
	return newEnvWith(t, max, nil)
}

// newEnvWith is newEnv with extra configured profiles.
func newEnvWith(t *testing.T, max int, extra map[string]lifecycle.Profile) *env {
	t.Helper()
	return newEnvConfig(t, max, extra, func(*server.Config) {})
}

// newEnvConfig is newEnvWith with the server's config changed by mod.
func newEnvConfig(t *testing.T, max int, extra map[string]lifecycle.Profile, mod func(*server.Config)) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/astrabox.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{os.Args[0]}, Env: []string{"ASTRABOX_TEST_MAIN=1"}})
	if err != nil {
		t.Fatal(err)
	}
	profiles := map[string]lifecycle.Profile{"small": {Name: "small", Backend: "process"}, "docker": {Name: "docker", Backend: "docker"}}
	maps.Copy(profiles, extra)
	n := newRecordingNotifier()
	cfg := server.Config{Store: st, Backends: map[string]sandbox.Provider{"process": p},
		Installed: []string{"process", "native", "docker"}, DefaultBackend: "process", MaxSandboxes: max,
		Profiles: profiles, Notifier: n}
	mod(&cfg)
	srv := newServer(t, cfg)
	hs := httptest.NewServer(srv.Handler)
	t.Cleanup(func() {
		boxes, _ := p.List(context.Background())
		for _, b := range boxes {
			_ = p.Delete(context.Background(), b.ID)
		}
		hs.Close()
	})
	return &env{srv: hs, c: client.New(hs.URL, testKey), svc: srv.Sandboxes, p: p, n: n, handler: srv.Handler}
}

// newServer wires a server from cfg as `astrabox serve` does
// (internal/server), with the test API key and a throwaway vault. It is not
// started: the tests run reconciler passes themselves, so that nothing
// else changes their boxes meanwhile. t's cleanup closes it.
func newServer(t *testing.T, cfg server.Config) *server.Server {
	t.Helper()
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	ring, err := vault.New(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIKeyHash, cfg.Vault = api.HashKey(testKey), ring
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func timeout(s int64) *int64 { return &s }

func TestLifecycleThroughSDK(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600), Entrypoint: []string{"sleep", "infinity"},
		Metadata: map[string]string{"project": "apollo", "team": "ml"}, ResourceLimits: map[string]string{"cpu": "500m", "memory": "512Mi"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sb.Status.State != "Running" || sb.ExpiresAt == nil || sb.Backend != "process" {
		t.Fatalf("created %+v", sb)
	}
	got, err := e.c.Get(ctx, sb.ID)
	if err != nil || got.ID != sb.ID || got.Metadata["project"] != "apollo" {
		t.Fatalf("get: %+v %v", got, err)
	}

	// execd through the proxy, with the endpoint's signed token only.
	x, err := e.c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: "echo hello; exit 3"})
	if err != nil || string(ex.Stdout) != "hello\n" || ex.ExitCode != 3 {
		t.Fatalf("exec through proxy: %+v %v", ex, err)
	}

	// List with metadata filters.
	list, err := e.c.List(ctx, client.ListOptions{Metadata: map[string]string{"project": "apollo"}})
	if err != nil || list.Pagination.TotalItems != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("list: %+v %v", list, err)
	}
	list, _ = e.c.List(ctx, client.ListOptions{Metadata: map[string]string{"project": "zeus"}})
	if list.Pagination.TotalItems != 0 {
		t.Fatalf("metadata filter matched %d", list.Pagination.TotalItems)
	}

	// Renew: later works, earlier is refused.
	later := sb.ExpiresAt.Add(time.Hour)
	if at, err := e.c.Renew(ctx, sb.ID, later, client.CreateOptions{}); err != nil || !at.Equal(later.UTC().Truncate(time.Second)) && !at.Equal(later.UTC()) {
		t.Fatalf("renew: %v %v", at, err)
	}
	if _, err := e.c.Renew(ctx, sb.ID, later.Add(-time.Minute), client.CreateOptions{}); client.CodeOf(err) != sandbox.CodeInvalidRequest {
		t.Fatalf("renew to an earlier time: %v", err)
	}

	// The process backend cannot pause: refused with the capability named.
	if err := e.c.Pause(ctx, sb.ID); client.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("pause: %v", err)
	}

	if err := e.c.Delete(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.Get(ctx, sb.ID); client.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("get after delete: %v", err)
	}
	if boxes, _ := e.p.List(ctx); len(boxes) != 0 {
		t.Fatalf("backend still holds %d boxes", len(boxes))
	}
}

func TestIdempotentCreate(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	req := wire.CreateSandboxRequest{Timeout: timeout(600), Entrypoint: []string{"sleep", "infinity"}}
	a, err := e.c.Create(ctx, req, client.CreateOptions{IdempotencyKey: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.c.Create(ctx, req, client.CreateOptions{IdempotencyKey: "k1"})
	if err != nil || b.ID != a.ID {
		t.Fatalf("replay: %+v %v", b, err)
	}
	req.Metadata = map[string]string{"x": "y"}
	if _, err := e.c.Create(ctx, req, client.CreateOptions{IdempotencyKey: "k1"}); client.CodeOf(err) != sandbox.CodeIdempotencyMismatch {
		t.Fatalf("same key, other body: %v", err)
	}
	if list, _ := e.c.List(ctx, client.ListOptions{}); list.Pagination.TotalItems != 1 {
		t.Fatalf("%d sandboxes, want 1", list.Pagination.TotalItems)
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t, 1)
	tests := []struct {
		name, method, path, body string
		status                   int
		code                     sandbox.Code
	}{
		{"malformed JSON", "POST", "/v1/sandboxes", `{"timeout":`, 400, sandbox.CodeInvalidRequest},
		{"wrong type", "POST", "/v1/sandboxes", `{"timeout":"soon"}`, 400, sandbox.CodeInvalidRequest},
		{"timeout below minimum", "POST", "/v1/sandboxes", `{"timeout":10,"entrypoint":["true"]}`, 400, sandbox.CodeInvalidRequest},
		{"bad cpu", "POST", "/v1/sandboxes", `{"resourceLimits":{"cpu":"lots"}}`, 400, sandbox.CodeInvalidRequest},
		{"bad memory", "POST", "/v1/sandboxes", `{"resourceLimits":{"memory":"-1Gi"}}`, 400, sandbox.CodeInvalidRequest},
		{"unknown resource", "POST", "/v1/sandboxes", `{"resourceLimits":{"qubits":"4"}}`, 400, sandbox.CodeInvalidRequest},
		{"unknown profile", "POST", "/v1/sandboxes", `{"extensions":{"profile":"nope"}}`, 400, sandbox.CodeInvalidRequest},
		{"disabled backend", "POST", "/v1/sandboxes", `{"extensions":{"profile":"docker"}}`, 400, sandbox.CodeBackendDisabled},
		{"gpu", "POST", "/v1/sandboxes", `{"resourceLimits":{"gpu":"1"}}`, 400, sandbox.CodeCapability},
		{"network limited", "POST", "/v1/sandboxes", `{"networkPolicy":{"defaultAction":"deny","egress":[{"action":"allow","target":"pypi.org"}]}}`, 400, sandbox.CodeCapability},
		{"bad state filter", "GET", "/v1/sandboxes?state=Sleeping", ``, 400, sandbox.CodeInvalidRequest},
		{"bad page size", "GET", "/v1/sandboxes?pageSize=0", ``, 400, sandbox.CodeInvalidRequest},
		{"unknown sandbox", "GET", "/v1/sandboxes/nope", ``, 404, sandbox.CodeSandboxNotFound},
		{"delete unknown", "DELETE", "/v1/sandboxes/nope", ``, 404, sandbox.CodeSandboxNotFound},
		{"renew without body", "POST", "/v1/sandboxes/nope/renew-expiration", ``, 400, sandbox.CodeInvalidRequest},
		{"bad port", "GET", "/v1/sandboxes/nope/endpoints/99999", ``, 400, sandbox.CodeInvalidRequest},
		{"unknown snapshot", "GET", "/v1/snapshots/snap-nope", ``, 404, sandbox.CodeNotFound},
		{"huge body", "POST", "/v1/sandboxes", `{"metadata":{"a":"` + strings.Repeat("x", 2<<20) + `"}}`, 413, sandbox.CodePayloadTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set(api.HeaderAPIKey, testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var er wire.ErrorResponse
			b, _ := io.ReadAll(resp.Body)
			_ = json.Unmarshal(b, &er)
			if resp.StatusCode != tt.status || er.Code != string(tt.code) || resp.Header.Get("X-Request-ID") == "" {
				t.Fatalf("got %d %s", resp.StatusCode, b)
			}
		})
	}
	t.Run("no key", func(t *testing.T) {
		resp, err := http.Get(e.srv.URL + "/v1/sandboxes")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 401 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("quota", func(t *testing.T) {
		ctx := ctxT(t)
		sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{}); client.CodeOf(err) != sandbox.CodeTooManyRequests {
			t.Fatalf("over quota: %v", err)
		}
		_ = e.c.Delete(ctx, sb.ID)
	})
}

func TestProxyClosedPortAndConcurrentDeletes(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ep, err := e.c.Endpoint(ctx, sb.ID, 9)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", "http://"+ep.Endpoint+"/x?y=1", nil)
	for k, v := range ep.Headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(b), string(sandbox.CodeUpstreamUnreachable)) {
		t.Fatalf("closed port: %d %s", resp.StatusCode, b)
	}
	// A forged token is refused.
	req.Header.Set(api.HeaderProxyToken, "9999999999.AAAA")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("forged token: %d", resp.StatusCode)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch i % 3 {
			case 0:
				errs <- e.c.Delete(ctx, sb.ID)
			case 1:
				_, err := e.c.Renew(ctx, sb.ID, time.Now().Add(time.Duration(2+i)*time.Hour), client.CreateOptions{})
				errs <- err
			default:
				errs <- e.c.Pause(ctx, sb.ID)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		switch {
		case err == nil:
		case client.CodeOf(err) == sandbox.CodeSandboxNotFound, client.CodeOf(err) == sandbox.CodeCapability,
			client.CodeOf(err) == sandbox.CodeConflict, client.CodeOf(err) == sandbox.CodeInvalidRequest:
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if _, err := e.c.Get(ctx, sb.ID); client.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("after concurrent deletes: %v", err)
	}
	if boxes, _ := e.p.List(ctx); len(boxes) != 0 {
		t.Fatalf("backend leaked %d boxes", len(boxes))
	}
}

func TestReconcilerExpiresAndRemovesOrphans(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(60)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An orphan: a box the backend has that no record names.
	if _, err := e.p.Create(ctx, "orphan1", sandbox.Spec{Image: "host"}); err != nil {
		t.Fatal(err)
	}
	// Move the clock past the expiry by renewing into the past is refused;
	// instead reconcile with a service clock one hour ahead.
	future := lifecycleAt(t, e, time.Now().Add(time.Hour))
	future.ReconcileBackend(ctx, "process", e.p)
	if _, err := e.c.Get(ctx, sb.ID); client.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("expired sandbox still there: %v", err)
	}
	boxes, _ := e.p.List(ctx)
	if len(boxes) != 0 {
		t.Fatalf("%d boxes left after reconcile: %+v", len(boxes), boxes)
	}
}

// lifecycleAt returns a service over e's store and backend whose clock
// reads at, to run reconciler passes in the future. It is the sandbox
// service alone (no server has a clock to set); its state events land in
// the store, where e's followers find them.
func lifecycleAt(t *testing.T, e *env, at time.Time) *lifecycle.Service {
	svc, err := lifecycle.New(lifecycle.Config{Store: e.svc.Store(), Backends: map[string]sandbox.Provider{"process": e.p},
		DefaultBackend: "process", Now: func() time.Time { return at }})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func TestHealthMetricsOpenAPI(t *testing.T) {
	e := newEnv(t, 0)
	tests := []struct {
		path   string
		status int
		want   string
	}{
		{"/healthz", 200, `"ok"`},
		{"/health", 200, `"ok"`},
		{"/readyz", 200, `"ready":true`},
		{"/metrics", 200, `astrabox_sandboxes{backend="process",state="Running"}`},
		{"/openapi.yaml", 200, "Idempotency-Key"},
	}
	for _, tt := range tests {
		resp, err := http.Get(e.srv.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || !strings.Contains(string(b), tt.want) {
			t.Errorf("GET %s: %d %.200s", tt.path, resp.StatusCode, b)
		}
	}
}

// TestMetricsFamilies: /metrics reports requests by route pattern (never
// the raw path, whose ids would multiply the series) and code, and has
// the families the Grafana dashboard (docs/grafana-dashboard.json) graphs.
func TestMetricsFamilies(t *testing.T) {
	e := newEnv(t, 0)
	get := func(path string) (int, string) {
		req, _ := http.NewRequest("GET", e.srv.URL+path, nil)
		req.Header.Set(api.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, id := range []string{"metrics-id-one", "metrics-id-two"} {
		if code, _ := get("/v1/sandboxes/" + id); code != http.StatusNotFound {
			t.Fatalf("GET /v1/sandboxes/%s: %d", id, code)
		}
	}
	get("/healthz")
	code, body := get("/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	for _, want := range []string{
		`astrabox_http_requests_total{route="GET /v1/sandboxes/{id}",code="404"} `,
		`astrabox_http_requests_total{route="GET /healthz",code="200"} `,
		`astrabox_http_request_duration_seconds_bucket{route="GET /v1/sandboxes/{id}",le="+Inf"} `,
		`astrabox_http_request_duration_seconds_count{route="GET /healthz"} `,
		"# TYPE astrabox_sessions gauge", `astrabox_sessions{state="READY"} `,
		"# TYPE astrabox_replies_total counter",
		"# TYPE astrabox_model_requests_total counter",
		"# TYPE astrabox_model_request_duration_seconds histogram",
		"# TYPE astrabox_log_appends_total counter",
		"# TYPE astrabox_reconcile_passes_total counter",
		"# TYPE astrabox_reconcile_actions_total counter",
		"# TYPE astrabox_egress_decisions_total counter",
		"# TYPE astrabox_pool_ready gauge",
		"# TYPE astrabox_api_errors_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, "metrics-id-") {
		t.Errorf("/metrics names a request's id")
	}
	// Every sample line is name{labels} value or name value.
	sample := regexp.MustCompile(`^[a-z_]+(\{([a-z_]+="(\\.|[^"\\])*",?)*\})? [-+0-9.eInf]+$`)
	for _, line := range strings.Split(strings.TrimSpace(body), "\n") {
		if !strings.HasPrefix(line, "#") && !sample.MatchString(line) {
			t.Errorf("bad sample line %q", line)
		}
	}
}

func TestProfilesAPI(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	put := func(name, body string) (int, string) {
		req, _ := http.NewRequest("PUT", e.srv.URL+"/v1/profiles/"+name, strings.NewReader(body))
		req.Header.Set(api.HeaderAPIKey, testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := put("tiny", `{"backend":"process","resources":{"memoryBytes":268435456},"timeout":120}`); code != 200 {
		t.Fatalf("put: %d %s", code, body)
	}
	for _, bad := range []struct{ name, body string }{
		{"Bad_Name", `{}`}, {"small", `{}`}, {"x", `{"backend":"nope"}`}, {"y", `{"network":"sideways"}`}, {"z", `{"timeout":-5}`}, {"w", `{"poolSize":-1}`}, {"u", `{"poolSize":65}`}, {"v", `{"color":"red"}`},
	} {
		if code, _ := put(bad.name, bad.body); code < 400 {
			t.Errorf("put %s %s accepted", bad.name, bad.body)
		}
	}
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Extensions: map[string]string{"profile": "tiny"}}, client.CreateOptions{})
	if err != nil || sb.Profile != "tiny" || sb.ExpiresAt == nil {
		t.Fatalf("create with a stored profile: %+v %v", sb, err)
	}
	req, _ := http.NewRequest("GET", e.srv.URL+"/v1/profiles", nil)
	req.Header.Set(api.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"tiny"`, `"small"`, `"default"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("profiles list lacks %s: %s", want, b)
		}
	}
}

func TestIdleTimeoutSparesBusyBoxes(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	idle := int64(60)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{IdleTimeout: &idle}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x, err := e.c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: "sleep 300", Background: true})
	if err != nil {
		t.Fatal(err)
	}
	lifecycleAt(t, e, time.Now().Add(2*time.Minute)).ReconcileBackend(ctx, "process", e.p)
	if _, err := e.c.Get(ctx, sb.ID); err != nil {
		t.Fatalf("a box running a command was reaped as idle: %v", err)
	}
	if err := x.Interrupt(ctx, ex.ID); err != nil {
		t.Fatal(err)
	}
	lifecycleAt(t, e, time.Now().Add(10*time.Minute)).ReconcileBackend(ctx, "process", e.p)
	if _, err := e.c.Get(ctx, sb.ID); client.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Fatalf("an idle box was not reaped: %v", err)
	}
}

func TestRestartReattaches(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A second server over the same store and backend, as after a restart:
	// nothing in memory, the box still running.
	srv2 := newServer(t, server.Config{Store: e.svc.Store(), Backends: map[string]sandbox.Provider{"process": e.p}, DefaultBackend: "process"})
	hs2 := httptest.NewServer(srv2.Handler)
	defer hs2.Close()
	srv2.Sandboxes.ReconcileBackend(ctx, "process", e.p) // must keep the running box
	c2 := client.New(hs2.URL, testKey)
	got, err := c2.Get(ctx, sb.ID)
	if err != nil || got.Status.State != "Running" || !got.ExpiresAt.Equal(*sb.ExpiresAt) {
		t.Fatalf("after restart: %+v %v", got, err)
	}
	x, err := c2.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: "echo still-here"}); err != nil || string(ex.Stdout) != "still-here\n" {
		t.Fatalf("exec after restart: %+v %v", ex, err)
	}
}
