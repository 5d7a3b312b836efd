package api_test

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// poolMembers returns the ids of the boxes waiting in any pool.
func poolMembers(t *testing.T, e *env) []string {
	t.Helper()
	recs, _, err := e.svc.Store().ListSandboxes(context.Background(), store.ListFilter{AllPools: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Pool != "" && r.State == sandbox.StateRunning {
			out = append(out, r.ID)
		}
	}
	return out
}

// backendBoxes returns the ids of every box the backend holds.
func backendBoxes(t *testing.T, e *env) []string {
	t.Helper()
	infos, err := e.p.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		out = append(out, i.ID)
	}
	slices.Sort(out)
	return out
}

func TestWarmPool(t *testing.T) {
	e := newEnvWith(t, 0, map[string]lifecycle.Profile{
		"warm": {Name: "warm", Backend: "process", PoolSize: 2, Timeout: time.Hour, Entrypoint: []string{"sleep", "infinity"}},
	})
	ctx := ctxT(t)
	e.svc.ReconcileBackend(ctx, "process", e.p)
	pooled := poolMembers(t, e)
	if len(pooled) != 2 || len(backendBoxes(t, e)) != 2 {
		t.Fatalf("after a pass: pool %v, backend %v; want 2 ready boxes", pooled, backendBoxes(t, e))
	}
	if list, err := e.c.List(ctx, client.ListOptions{}); err != nil || list.Pagination.TotalItems != 0 {
		t.Fatalf("users' list shows pooled boxes: %+v %v", list, err)
	}

	// A create that fits the pool claims a ready box and gets its own
	// metadata and expiry; the box works.
	sb, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(120), Metadata: map[string]string{"run": "1"},
		Extensions: map[string]string{"profile": "warm"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(pooled, sb.ID) {
		t.Fatalf("created %s, not one of the pooled %v", sb.ID, pooled)
	}
	if sb.Status.State != "Running" || sb.Metadata["run"] != "1" || sb.ExpiresAt == nil ||
		sb.ExpiresAt.Sub(sb.CreatedAt) != 120*time.Second || sb.Profile != "warm" || !slices.Equal(sb.Entrypoint, []string{"sleep", "infinity"}) {
		t.Fatalf("claimed record %+v", sb)
	}
	x, err := e.c.Execd(ctx, sb.ID)
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: "echo warm"}); err != nil || string(ex.Stdout) != "warm\n" {
		t.Fatalf("exec in a claimed box: %+v %v", ex, err)
	}
	if list, _ := e.c.List(ctx, client.ListOptions{}); list.Pagination.TotalItems != 1 {
		t.Fatalf("users' list has %d sandboxes, want the claimed one", list.Pagination.TotalItems)
	}

	// A request that shapes the box differently starts its own.
	cold, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(120), Env: map[string]string{"X": "1"},
		Extensions: map[string]string{"profile": "warm"}}, client.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(pooled, cold.ID) {
		t.Fatalf("a request with its own env claimed pooled box %s", cold.ID)
	}

	// The pass refills the pool; a dead member is skipped by the next claim.
	e.svc.ReconcileBackend(ctx, "process", e.p)
	pooled = poolMembers(t, e)
	if len(pooled) != 2 {
		t.Fatalf("after a claim and a pass: pool %v, want 2", pooled)
	}
	if err := e.p.Delete(ctx, pooled[0]); err != nil { // the box dies behind the server's back
		t.Fatal(err)
	}
	sb2, err := e.c.Create(ctx, wire.CreateSandboxRequest{Timeout: timeout(120), Extensions: map[string]string{"profile": "warm"}}, client.CreateOptions{})
	if err != nil {
		t.Fatalf("create with a dead pool member: %v", err)
	}
	if sb2.ID != pooled[1] {
		t.Fatalf("claimed %s, want the live member %s", sb2.ID, pooled[1])
	}

	// Metrics count hits and misses and the boxes waiting.
	e.svc.ReconcileBackend(ctx, "process", e.p)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`astrabox_pool_ready{pool="warm/`, `outcome="hit"} 2`, `outcome="miss"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}

	// Deleting users' sandboxes leaves the pool; shrinking it to zero (a
	// stored profile) retires its boxes.
	for _, id := range []string{sb.ID, cold.ID, sb2.ID} {
		if err := e.c.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(backendBoxes(t, e)); got != 2 {
		t.Fatalf("backend holds %d boxes, want the 2 pooled", got)
	}
	if _, err := e.svc.PutProfile(ctx, lifecycle.Profile{Name: "stored", Backend: "process", PoolSize: 1}); err != nil {
		t.Fatal(err)
	}
	e.svc.ReconcileBackend(ctx, "process", e.p)
	if got := len(poolMembers(t, e)); got != 3 {
		t.Fatalf("with a stored pooled profile: %d ready boxes, want 3", got)
	}
	if _, err := e.svc.PutProfile(ctx, lifecycle.Profile{Name: "stored", Backend: "process"}); err != nil {
		t.Fatal(err)
	}
	e.svc.ReconcileBackend(ctx, "process", e.p)
	if got, boxes := poolMembers(t, e), backendBoxes(t, e); len(got) != 2 || len(boxes) != 2 {
		t.Fatalf("after the stored profile's pool was removed: pool %v, backend %v", got, boxes)
	}
}

func TestWarmPoolSurvivesRestart(t *testing.T) {
	e := newEnvWith(t, 0, map[string]lifecycle.Profile{"warm": {Name: "warm", Backend: "process", PoolSize: 1}})
	ctx := ctxT(t)
	e.svc.ReconcileBackend(ctx, "process", e.p)
	pooled := poolMembers(t, e)
	if len(pooled) != 1 {
		t.Fatalf("pool %v", pooled)
	}
	// A second service over the same store: nothing in memory.
	svc2 := newServer(t, server.Config{Store: e.svc.Store(), Backends: map[string]sandbox.Provider{"process": e.p}, DefaultBackend: "process",
		Profiles: map[string]lifecycle.Profile{"warm": {Name: "warm", Backend: "process", PoolSize: 1}}}).Sandboxes
	svc2.ReconcileBackend(ctx, "process", e.p) // keeps the member, adds none
	if got := poolMembers(t, e); !slices.Equal(got, pooled) {
		t.Fatalf("after restart: pool %v, want %v", got, pooled)
	}
	rec, err := svc2.Create(ctx, lifecycle.CreateRequest{Profile: "warm"})
	if err != nil || rec.ID != pooled[0] {
		t.Fatalf("claim after restart: %+v %v", rec, err)
	}
	if _, err := svc2.AccessToken(ctx, rec); err != nil {
		t.Fatalf("token of a claimed box after restart: %v", err)
	}
}
