package lifecycle

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// testLimits are a small host's bounds: 2 CPUs, 4 GiB, pid_max 32768,
// 10 GiB of disk, a day of lifetime.
var testLimits = Limits{MaxMilliCPU: 2000, MaxMemoryBytes: 4 << 30, MaxPIDs: 32768, MaxDiskBytes: 10 << 30, MaxTimeout: 24 * time.Hour}

// TestLimitsOnEveryPath checks that each path that sets a sandbox's
// resources or lifetime refuses values beyond the server's bounds (and
// below the minimums) with LIMIT_OUT_OF_RANGE naming the bound: a create
// (request and profile merged), storing a profile, and a pool's plan.
func TestLimitsOnEveryPath(t *testing.T) {
	svc := newLimitedService(t, map[string]Profile{"ok": {Backend: "process", Resources: sandbox.Resources{MilliCPU: 1000}}}, testLimits)
	ctx := context.Background()
	tests := []struct {
		name string
		res  sandbox.Resources
		ttl  time.Duration
		idle time.Duration
		want string // in the message; "" for accepted
	}{
		{name: "within", res: sandbox.Resources{MilliCPU: 2000, MemoryBytes: 4 << 30, PIDs: 32768, DiskBytes: 10 << 30}, ttl: 24 * time.Hour},
		{name: "pids beyond pid_max", res: sandbox.Resources{PIDs: 100000}, want: "pids 100000 exceeds the server's maximum 32768"},
		{name: "memory 1024 TiB", res: sandbox.Resources{MemoryBytes: 1 << 50}, want: "memory 1024Ti exceeds the server's maximum 4Gi"},
		{name: "cpu 1024", res: sandbox.Resources{MilliCPU: 1024000}, want: "cpu 1024 exceeds the server's maximum 2"},
		{name: "disk", res: sandbox.Resources{DiskBytes: 11 << 30}, want: "disk 11Gi exceeds the server's maximum 10Gi"},
		{name: "cpu below the minimum", res: sandbox.Resources{MilliCPU: 1}, want: "cpu 1m is below the minimum 10m"},
		{name: "memory of one byte", res: sandbox.Resources{MemoryBytes: 1}, want: "memory 1 is below the minimum 32Mi"},
		{name: "pids below the minimum", res: sandbox.Resources{PIDs: 2}, want: "pids 2 is below the minimum 32"},
		{name: "ttl", ttl: 25 * time.Hour, want: "timeout 90000s exceeds the server's maximum 86400s"},
		{name: "idle timeout", idle: 25 * time.Hour, want: "idleTimeout 90000s exceeds the server's maximum 86400s"},
	}
	check := func(t *testing.T, what string, err error, want string) {
		t.Helper()
		if want == "" {
			if err != nil {
				t.Fatalf("%s: %v", what, err)
			}
			return
		}
		if sandbox.CodeOf(err) != sandbox.CodeLimitOutOfRange || !strings.Contains(sandbox.MessageOf(err), want) {
			t.Fatalf("%s: %v (code %s), want %s %q", what, err, sandbox.CodeOf(err), sandbox.CodeLimitOutOfRange, want)
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := CreateRequest{Profile: "ok", Resources: tc.res, Timeout: &tc.ttl, IdleTimeout: &tc.idle}
			_, _, _, err := svc.plan(ctx, req)
			check(t, "create", err, tc.want)

			name := "p-" + strings.ReplaceAll(tc.name, " ", "-")
			_, err = svc.PutProfile(ctx, Profile{Name: strings.ToLower(name[:min(len(name), 60)]), Resources: tc.res, Timeout: tc.ttl, IdleTimeout: tc.idle})
			check(t, "put profile", err, tc.want)

			_, err = New(Config{Store: svc.cfg.Store, Backends: svc.cfg.Backends, DefaultBackend: "process", Limits: testLimits,
				Profiles: map[string]Profile{"big": {Resources: tc.res, Timeout: tc.ttl, IdleTimeout: tc.idle}}})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("configured profile: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestPoolOfAProfileBeyondTheLimits checks that a stored profile that
// exceeds lowered limits plans no pool: its boxes are never created.
func TestPoolOfAProfileBeyondTheLimits(t *testing.T) {
	svc := newLimitedService(t, nil, testLimits)
	ctx := context.Background()
	if _, err := svc.PutProfile(ctx, Profile{Name: "big", Resources: sandbox.Resources{MemoryBytes: 4 << 30}, PoolSize: 2}); err != nil {
		t.Fatal(err)
	}
	svc.cfg.Limits.MaxMemoryBytes = 1 << 30 // the administrator lowers the bound
	targets, err := svc.poolTargets(ctx, "process")
	if err != nil || len(targets) != 0 {
		t.Fatalf("pool targets %v, %v; want none", targets, err)
	}
}

// TestRenewBeyondTheLimits checks that a renew's new expiry is bounded
// too, by the configured maximum and, with none, by the ceiling, so that
// no expiry is unrepresentable.
func TestRenewBeyondTheLimits(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		limits Limits
		at     time.Time
		want   string
	}{
		{"configured maximum", testLimits, now.Add(25 * time.Hour), "more than the server's maximum 86400s away"},
		{"ceiling", Limits{}, now.Add(MaxTimeoutCeiling + time.Hour), "more than the server's maximum 315360000s away"},
		{"year 9999", Limits{}, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), "maximum 315360000s"},
		{"within", testLimits, now.Add(23 * time.Hour), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := newLimitedService(t, nil, tc.limits)
			svc.now = func() time.Time { return now }
			rec := &store.Sandbox{ID: "r1", Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now}
			if err := svc.cfg.Store.CreateSandbox(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			_, err := svc.Renew(context.Background(), "r1", tc.at)
			if tc.want == "" && err != nil || tc.want != "" && (sandbox.CodeOf(err) != sandbox.CodeLimitOutOfRange || !strings.Contains(sandbox.MessageOf(err), tc.want)) {
				t.Fatalf("renew: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestLimitsValidate(t *testing.T) {
	for _, tc := range []struct {
		l  Limits
		ok bool
	}{
		{Limits{}, true},
		{testLimits, true},
		{Limits{MaxMemoryBytes: 1 << 20}, false},
		{Limits{MaxPIDs: 1}, false},
		{Limits{MaxTimeout: -time.Second}, false},
		{Limits{MaxTimeout: MaxTimeoutCeiling + time.Second}, false},
	} {
		if err := tc.l.Validate(); (err == nil) != tc.ok {
			t.Errorf("%+v: %v", tc.l, err)
		}
	}
}
