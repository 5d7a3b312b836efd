package api_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
)

// refusingOnce is the process harness whose backend refuses creates
// while refuse is set, before any box exists.
type refusingOnce struct {
	*process.Provider
	refuse *atomic.Bool
}

func (p refusingOnce) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if p.refuse.Load() {
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeImageNotFound, "image %q not found", spec.Image)
	}
	return p.Provider.Create(ctx, id, spec)
}

// TestRefusedCreateIsNotListed: a create the backend refuses answers
// with its error and leaves nothing any list shows, at once; retried with
// the same Idempotency-Key once the backend accepts, it creates the box.
func TestRefusedCreateIsNotListed(t *testing.T) {
	refuse := &atomic.Bool{}
	refuse.Store(true)
	e := newEnvConfig(t, 0, nil, func(c *server.Config) {
		c.Backends["process"] = refusingOnce{c.Backends["process"].(*process.Provider), refuse}
	})
	ctx := ctxT(t)
	req := wire.CreateSandboxRequest{Timeout: timeout(600), Entrypoint: []string{"sleep", "infinity"}}
	for _, key := range []string{"", "retry-1"} {
		if _, err := e.c.Create(ctx, req, client.CreateOptions{IdempotencyKey: key}); client.CodeOf(err) != sandbox.CodeImageNotFound {
			t.Fatalf("create (key %q) on a refusing backend: %v, want %s", key, err, sandbox.CodeImageNotFound)
		}
		for _, state := range []string{"", "Failed"} {
			opts := client.ListOptions{}
			if state != "" {
				opts.States = []string{state}
			}
			list, err := e.c.List(ctx, opts)
			if err != nil || list.Pagination.TotalItems != 0 || len(list.Items) != 0 {
				t.Fatalf("list (state %q) right after a refused create: %+v %v, want none", state, list, err)
			}
		}
	}
	refuse.Store(false)
	sb, err := e.c.Create(ctx, req, client.CreateOptions{IdempotencyKey: "retry-1"})
	if err != nil || sb.Status.State != "Running" {
		t.Fatalf("retry with the same key once the backend accepts: %+v %v", sb, err)
	}
	if list, _ := e.c.List(ctx, client.ListOptions{}); list.Pagination.TotalItems != 1 || list.Items[0].ID != sb.ID {
		t.Fatalf("list after the retry: %+v, want only %s", list, sb.ID)
	}
}
