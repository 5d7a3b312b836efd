package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
)

// smallHost are the limits of a small host: 2 CPUs, 4 GiB, pid_max 32768,
// 10 GiB of disk, a day of lifetime.
var smallHost = lifecycle.Limits{MaxMilliCPU: 2000, MaxMemoryBytes: 4 << 30, MaxPIDs: 32768, MaxDiskBytes: 10 << 30, MaxTimeout: 24 * time.Hour}

// callAPI sends an authenticated request and returns the status and error
// body.
func callAPI(t *testing.T, e *env, method, path, body string) (int, wire.ErrorResponse, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set(api.HeaderAPIKey, testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var er wire.ErrorResponse
	_ = json.Unmarshal(b, &er)
	return resp.StatusCode, er, string(b)
}

// TestRequestsBeyondTheHost checks issue #12's "requests beyond the host":
// limits over the server's bounds, below the minimums, or numbers that
// would overflow are refused with 400 LIMIT_OUT_OF_RANGE naming the bound,
// on create and on both profile routes.
func TestRequestsBeyondTheHost(t *testing.T) {
	e := newEnvConfig(t, 0, nil, func(c *server.Config) { c.Limits = smallHost })
	tests := []struct {
		name, limits string // resourceLimits JSON
		extra        string // further create fields
		want         string // in the message
	}{
		{"pids beyond pid_max", `{"pids":"100000"}`, ``, "pids 100000 exceeds the server's maximum 32768"},
		{"memory 1024 TiB", `{"memory":"1024Ti"}`, ``, "memory 1024Ti exceeds the server's maximum 4Gi"},
		{"cpu 1024", `{"cpu":"1024"}`, ``, "cpu 1024 exceeds the server's maximum 2"},
		{"disk", `{"disk":"1Ti"}`, ``, "disk 1Ti exceeds the server's maximum 10Gi"},
		{"cpu 0.0001", `{"cpu":"0.0001"}`, ``, "below the minimum 10m"},
		{"memory of one byte", `{"memory":"1"}`, ``, "memory 1 is below the minimum 32Mi"},
		{"pids overflow", `{"pids":"99999999999999999999"}`, ``, "exceeds the largest accepted"},
		{"cpu overflow", `{"cpu":"1e300"}`, ``, "exceeds the largest accepted"},
		{"timeout 2^62", `{}`, `,"timeout":4611686018427387904`, "timeout 4611686018427387904s exceeds the server's maximum 86400s"},
		{"timeout over the maximum", `{}`, `,"timeout":86401`, "exceeds the server's maximum 86400s"},
		{"idle timeout 2^62", `{}`, `,"idleTimeout":4611686018427387904`, "idleTimeout 4611686018427387904s exceeds"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, er, raw := callAPI(t, e, "POST", "/v1/sandboxes", `{"resourceLimits":`+tc.limits+tc.extra+`}`)
			if status != 400 || er.Code != string(sandbox.CodeLimitOutOfRange) || !strings.Contains(er.Message, tc.want) {
				t.Fatalf("create: %d %s, want 400 %s %q", status, raw, sandbox.CodeLimitOutOfRange, tc.want)
			}
		})
	}
	profiles := []struct{ name, body, want string }{
		{"pids", `{"resources":{"pids":100000}}`, "pids 100000 exceeds the server's maximum 32768"},
		{"memory", `{"resources":{"memoryBytes":1125899906842624}}`, "memory 1024Ti exceeds"},
		{"cpu", `{"resources":{"milliCpu":1}}`, "below the minimum 10m"},
		{"timeout", `{"timeout":90000}`, "timeout 90000s exceeds the server's maximum 86400s"},
	}
	for _, tc := range profiles {
		for _, path := range []string{"/v1/profiles/big", "/api/v1/runtime-profiles/big"} {
			t.Run("profile "+tc.name+" "+path, func(t *testing.T) {
				status, er, raw := callAPI(t, e, "PUT", path, tc.body)
				if status != 400 || er.Code != string(sandbox.CodeLimitOutOfRange) || !strings.Contains(er.Message, tc.want) {
					t.Fatalf("%d %s, want 400 %s %q", status, raw, sandbox.CodeLimitOutOfRange, tc.want)
				}
			})
		}
	}
	t.Run("renew far ahead", func(t *testing.T) {
		ctx := ctxT(t)
		sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600), ResourceLimits: map[string]string{"cpu": "2", "pids": "32768"}}, client.CreateOptions{})
		if err != nil {
			t.Fatalf("create within the bounds: %v", err)
		}
		defer e.c.Delete(ctx, sb.ID)
		for _, at := range []time.Time{time.Now().Add(25 * time.Hour), time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)} {
			if _, err := e.c.Renew(ctx, sb.ID, at, client.CreateOptions{}); client.CodeOf(err) != sandbox.CodeLimitOutOfRange ||
				!strings.Contains(err.Error(), "maximum 86400s") {
				t.Fatalf("renew to %s: %v", at, err)
			}
		}
		if _, err := e.c.Renew(ctx, sb.ID, time.Now().Add(time.Hour), client.CreateOptions{}); err != nil {
			t.Fatalf("renew within the bound: %v", err)
		}
	})
}

// TestDefaultLimitsAreTheHosts checks that a server configured with no
// limits still refuses what this host cannot give: one pid beyond its
// pid_max, one CPU beyond its CPUs.
func TestDefaultLimitsAreTheHosts(t *testing.T) {
	e := newEnv(t, 0)
	pidMax, err := procfs.PIDMax()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, limits := range []string{
		fmt.Sprintf(`{"pids":"%d"}`, pidMax+1),
		fmt.Sprintf(`{"cpu":"%d"}`, runtime.NumCPU()+1),
	} {
		status, er, raw := callAPI(t, e, "POST", "/v1/sandboxes", `{"resourceLimits":`+limits+`}`)
		if status != 400 || er.Code != string(sandbox.CodeLimitOutOfRange) {
			t.Fatalf("%s: %d %s", limits, status, raw)
		}
	}
}

// TestMetadataPatchHeldToTheCreateLimits replays issue #12's report:
// twenty PATCHes of about 1 MiB each built one 18 MB record. Each is now
// refused (INVALID_REQUEST_BODY, as create answers), as are small patches
// once the record they would leave exceeds the total bound, and the
// stored record stays within it.
func TestMetadataPatchHeldToTheCreateLimits(t *testing.T) {
	e := newEnv(t, 0)
	ctx := ctxT(t)
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(600)}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.c.Delete(ctx, sb.ID)
	patch := func(prefix string, n, size int) string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("%s%d", prefix, i)] = strings.Repeat("v", size)
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	path := "/v1/sandboxes/" + sb.ID + "/metadata"
	for i := range 20 {
		body := patch(fmt.Sprintf("p%d-", i), 1000, 1000) // just under the 1 MiB body limit
		if status, er, raw := callAPI(t, e, "PATCH", path, body); status != 400 || er.Code != string(sandbox.CodeInvalidRequest) {
			t.Fatalf("patch %d of %d bytes: %d %.200s", i, len(body), status, raw)
		}
	}
	refused := false
	for i := range 20 {
		status, er, raw := callAPI(t, e, "PATCH", path, patch(fmt.Sprintf("s%d-", i), 8, 1024))
		if status == 400 && er.Code == string(sandbox.CodeInvalidRequest) && strings.Contains(er.Message, "at most 16384") {
			refused = true
			break
		}
		if status != 200 {
			t.Fatalf("small patch %d: %d %s", i, status, raw)
		}
	}
	got, err := e.c.Get(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	size := 0
	for k, v := range got.Metadata {
		size += len(k) + len(v)
	}
	if !refused || size > lifecycle.MaxMetadataBytes || len(got.Metadata) > lifecycle.MaxMetadataEntries {
		t.Fatalf("refused %v; record of %d entries, %d bytes", refused, len(got.Metadata), size)
	}
	if status, er, raw := callAPI(t, e, "POST", "/v1/sandboxes", `{"metadata":`+patch("c", 20, 1000)+`}`); status != 400 || er.Code != string(sandbox.CodeInvalidRequest) {
		t.Fatalf("create with 20 kB of metadata: %d %s", status, raw)
	}
}
