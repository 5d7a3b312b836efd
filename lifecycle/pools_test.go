package lifecycle

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

func TestPoolKey(t *testing.T) {
	base := sandbox.Spec{Image: "host", Entrypoint: []string{"sleep", "infinity"}, Env: map[string]string{"A": "1", "B": "2"},
		Resources: sandbox.Resources{MilliCPU: 1000}, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}}
	key := poolKey("p", "native", base)
	tests := []struct {
		name    string
		profile string
		backend string
		mod     func(*sandbox.Spec)
		same    bool
	}{
		{"metadata is the record's", "p", "native", func(s *sandbox.Spec) { s.Metadata = map[string]string{"x": "y"} }, true},
		{"timeouts are the record's", "p", "native", func(s *sandbox.Spec) { s.Timeout, s.IdleTimeout = time.Hour, time.Minute }, true},
		{"capabilities are only checked", "p", "native", func(s *sandbox.Spec) { s.Capabilities = []sandbox.Capability{sandbox.CapPTY} }, true},
		{"env order does not matter", "p", "native", func(s *sandbox.Spec) { s.Env = map[string]string{"B": "2", "A": "1"} }, true},
		{"other profile", "q", "native", func(*sandbox.Spec) {}, false},
		{"other backend", "p", "docker", func(*sandbox.Spec) {}, false},
		{"image", "p", "native", func(s *sandbox.Spec) { s.Image = "debian" }, false},
		{"entrypoint", "p", "native", func(s *sandbox.Spec) { s.Entrypoint = nil }, false},
		{"env value", "p", "native", func(s *sandbox.Spec) { s.Env = map[string]string{"A": "1", "B": "3"} }, false},
		{"resources", "p", "native", func(s *sandbox.Spec) { s.Resources.MemoryBytes = 1 << 30 }, false},
		{"network", "p", "native", func(s *sandbox.Spec) { s.Network.Mode = sandbox.NetworkUnrestricted }, false},
		{"workspace", "p", "native", func(s *sandbox.Spec) { s.Workspace = &sandbox.Workspace{Volume: "v"} }, false},
		{"runtime", "p", "native", func(s *sandbox.Spec) { s.Runtime = "runsc" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := base
			tc.mod(&s)
			if got := poolKey(tc.profile, tc.backend, s); (got == key) != tc.same {
				t.Errorf("key %s vs base %s: same = %v, want %v", got, key, got == key, tc.same)
			}
		})
	}
}

func TestProfileJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    Profile
		invalid bool
	}{
		{in: `{"name":"a","timeout":3600,"idleTimeout":60,"poolSize":2,"entrypoint":["sleep","infinity"]}`,
			want: Profile{Name: "a", Timeout: time.Hour, IdleTimeout: time.Minute, PoolSize: 2, Entrypoint: []string{"sleep", "infinity"}}},
		{in: `{"name":"a","timeout":-1}`, invalid: true},
		{in: `{"name":"a","timeout":1e300}`, invalid: true},
		{in: `{"name":"a","poolsize":2,"unknown":1}`, invalid: true},
	}
	for _, tc := range tests {
		var p Profile
		err := p.UnmarshalJSON([]byte(tc.in))
		if tc.invalid {
			if err == nil {
				t.Errorf("%s: accepted as %+v", tc.in, p)
			}
			continue
		}
		if err != nil || p.Name != tc.want.Name || p.Timeout != tc.want.Timeout || p.IdleTimeout != tc.want.IdleTimeout || p.PoolSize != tc.want.PoolSize || len(p.Entrypoint) != 2 {
			t.Errorf("%s: %+v %v", tc.in, p, err)
		}
		b, _ := p.MarshalJSON()
		var back Profile
		if err := back.UnmarshalJSON(b); err != nil || back.Timeout != p.Timeout {
			t.Errorf("round trip of %s: %s %v", tc.in, b, err)
		}
	}
}

// renewRecorder is a backend that keeps an expiry of its own
// (sandbox.Renewer) and records the renewals it is given.
type renewRecorder struct {
	sandbox.Provider
	mu sync.Mutex
	at map[string]time.Time
}

func (r *renewRecorder) Renew(_ context.Context, id string, at time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at[id] = at
	return nil
}

// TestAdoptForwardsTheNewExpiry checks that a box claimed from a pool,
// made with the pool's expiry, gets the claim's expiry on a backend that
// keeps its own (a native box's init enforces it).
func TestAdoptForwardsTheNewExpiry(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		renewed bool
	}{{"with a timeout", time.Hour, true}, {"without", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newTestService(t, nil, 0)
			rr := &renewRecorder{Provider: svc.cfg.Backends["process"], at: map[string]time.Time{}}
			svc.cfg.Backends["process"] = rr
			now := time.Now().UTC()
			rec := &store.Sandbox{ID: "p1", Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, LastActiveAt: now}
			if err := svc.cfg.Store.CreateSandbox(ctx, rec); err != nil {
				t.Fatal(err)
			}
			if err := svc.adopt(ctx, rec, sandbox.Spec{Image: "host", Timeout: tc.timeout}, []byte(`{}`), Owner{UserID: "u1", OrgID: "default"}); err != nil {
				t.Fatal(err)
			}
			if rec.OwnerID != "u1" || rec.OrgID != "default" {
				t.Errorf("adopted box owned by %q of %q, want u1 of default", rec.OwnerID, rec.OrgID)
			}
			at, ok := rr.at["p1"]
			if ok != tc.renewed || (ok && (rec.ExpiresAt == nil || !at.Equal(*rec.ExpiresAt))) {
				t.Fatalf("renewed %v to %v; record expires %v", ok, at, rec.ExpiresAt)
			}
		})
	}
}
