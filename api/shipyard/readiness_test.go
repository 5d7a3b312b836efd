package shipyard_test

import (
	"context"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// slowCreate delays every create of its backend, so that a sandbox is
// visibly starting for a while.
type slowCreate struct {
	sandbox.Provider
	delay time.Duration
}

func (s slowCreate) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return sandbox.Info{}, ctx.Err()
	}
	return s.Provider.Create(ctx, id, spec)
}

// TestReadiness is the readiness contract: a create answers promptly with
// a starting sandbox, no poll says ready before a command succeeds, and an
// exec on a starting sandbox waits for it instead of failing, while other
// routes answer session_not_ready.
func TestReadiness(t *testing.T) {
	env, c := newEnv(t)
	env.Stop()
	// Longer than the create wait (5 s) and the files routes' wait (5 s more).
	env.Prov = slowCreate{Provider: env.Prov, delay: 14 * time.Second}
	env.Start()
	c.base = env.URL + "/shipyard"
	usePythonDefault(env)

	start := time.Now()
	sb := c.must(201, "POST", "/v1/sandboxes", map[string]any{"ttl": 600})
	if d := time.Since(start); d > 7*time.Second || sb["status"] != "starting" {
		t.Fatalf("create answered %v after %s, want starting within the create wait", sb["status"], d)
	}
	id := sb["id"].(string)
	r := c.do("GET", "/v1/sandboxes/"+id+"/filesystem/directories", nil)
	if e := r.Err(t); r.Status != 503 || e["code"] != "session_not_ready" || e["details"].(map[string]any)["retry_after_ms"] == nil {
		t.Fatalf("files on a starting sandbox = %d %s", r.Status, r.Body)
	}
	done := make(chan map[string]any, 1)
	go func() {
		done <- c.must(200, "POST", "/v1/sandboxes/"+id+"/shell/exec", map[string]any{"command": "echo waited"})
	}()
	for {
		st := c.must(200, "GET", "/v1/sandboxes/"+id, nil)
		sandboxFields(t, st)
		if st["status"] == "ready" {
			// ready means a command succeeds now.
			if r := c.shell(id, "true"); r["success"] != true {
				t.Fatalf("ready, but a command failed: %v", r)
			}
			break
		}
		if st["status"] != "starting" {
			t.Fatalf("status %v while starting", st["status"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := <-done; r["output"] != "waited\n" {
		t.Fatalf("exec on a starting sandbox = %v", r)
	}
}
