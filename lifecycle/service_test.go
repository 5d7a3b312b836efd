package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// newTestService returns a service over a fresh SQLite store with the
// process backend enabled (nothing is started unless a test creates).
func newTestService(t *testing.T, profiles map[string]Profile, maxTimeout time.Duration) *Service {
	t.Helper()
	return newLimitedService(t, profiles, Limits{MaxTimeout: maxTimeout})
}

// newLimitedService is newTestService with limits.
func newLimitedService(t *testing.T, profiles map[string]Profile, limits Limits) *Service {
	t.Helper()
	st, err := sqlite.Open(context.Background(), t.TempDir()+"/s.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"/bin/false"}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"process": p}, Installed: []string{"process", "native"},
		DefaultBackend: "process", Profiles: profiles, Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func dur(d time.Duration) *time.Duration { return &d }

func TestPlan(t *testing.T) {
	svc := newTestService(t, map[string]Profile{
		"small":  {Name: "small", Backend: "process", Image: "img", Resources: sandbox.Resources{MilliCPU: 500, MemoryBytes: 1 << 28}, Timeout: time.Hour, Env: map[string]string{"A": "1", "B": "2"}},
		"native": {Name: "native", Backend: "native"},
	}, 2*time.Hour)
	tests := []struct {
		name  string
		req   CreateRequest
		code  sandbox.Code // "" for success
		check func(t *testing.T, backend string, spec sandbox.Spec)
	}{
		{name: "defaults", req: CreateRequest{}, check: func(t *testing.T, b string, s sandbox.Spec) {
			if b != "process" || s.Image != "host" || s.Network.Mode != sandbox.NetworkNone || s.Timeout != 0 {
				t.Fatalf("%s %+v", b, s)
			}
		}},
		{name: "profile values, request overrides", req: CreateRequest{Profile: "small", Env: map[string]string{"B": "3"},
			Resources: sandbox.Resources{MemoryBytes: 1 << 29}, Timeout: dur(30 * time.Minute)},
			check: func(t *testing.T, b string, s sandbox.Spec) {
				if s.Image != "img" || s.Resources.MilliCPU != 500 || s.Resources.MemoryBytes != 1<<29 || s.Timeout != 30*time.Minute ||
					s.Env["A"] != "1" || s.Env["B"] != "3" {
					t.Fatalf("%+v", s)
				}
			}},
		{name: "profile timeout applies when the request has none", req: CreateRequest{Profile: "small"},
			check: func(t *testing.T, b string, s sandbox.Spec) {
				if s.Timeout != time.Hour {
					t.Fatalf("timeout %s", s.Timeout)
				}
			}},
		{name: "unknown profile", req: CreateRequest{Profile: "nope"}, code: sandbox.CodeInvalidRequest},
		{name: "disabled backend", req: CreateRequest{Profile: "native"}, code: sandbox.CodeBackendDisabled},
		{name: "unknown backend", req: CreateRequest{Backend: "qemu"}, code: sandbox.CodeInvalidRequest},
		{name: "timeout over the maximum", req: CreateRequest{Timeout: dur(3 * time.Hour)}, code: sandbox.CodeLimitOutOfRange},
		{name: "missing capability", req: CreateRequest{Capabilities: []sandbox.Capability{sandbox.CapPause}}, code: sandbox.CodeCapability},
		{name: "network mode not offered", req: CreateRequest{Network: &sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"x.org"}}}, code: sandbox.CodeCapability},
		{name: "bad env name", req: CreateRequest{Env: map[string]string{"1X": "y"}}, code: sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, spec, _, err := svc.plan(context.Background(), tt.req)
			if got := sandbox.CodeOf(err); err != nil && got != tt.code || err == nil && tt.code != "" {
				t.Fatalf("error %v, want code %q", err, tt.code)
			}
			if err == nil && tt.check != nil {
				tt.check(t, b, spec)
			}
		})
	}
}

func TestRenewRules(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	svc := newTestService(t, nil, 24*time.Hour)
	svc.now = func() time.Time { return now }
	exp := now.Add(time.Hour)
	rec := &store.Sandbox{ID: "r1", Backend: "process", State: sandbox.StateRunning, CreatedAt: now, UpdatedAt: now, ExpiresAt: &exp}
	if err := svc.cfg.Store.CreateSandbox(context.Background(), rec); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		at   time.Time
		code sandbox.Code
	}{
		{"in the past", now.Add(-time.Minute), sandbox.CodeInvalidRequest},
		{"before the current expiry", now.Add(30 * time.Minute), sandbox.CodeInvalidRequest},
		{"beyond the maximum", now.Add(25 * time.Hour), sandbox.CodeLimitOutOfRange},
		{"later", now.Add(2 * time.Hour), ""},
		{"equal to the new expiry", now.Add(2 * time.Hour), sandbox.CodeInvalidRequest},
	}
	for _, tt := range tests {
		_, err := svc.Renew(context.Background(), "r1", tt.at)
		if got := sandbox.CodeOf(err); err != nil && got != tt.code || err == nil && tt.code != "" {
			t.Errorf("%s: %v, want code %q", tt.name, err, tt.code)
		}
	}
	if _, err := svc.Renew(context.Background(), "missing", now.Add(3*time.Hour)); sandbox.CodeOf(err) != sandbox.CodeSandboxNotFound {
		t.Errorf("renew of a missing sandbox: %v", err)
	}
}

func TestProfileNames(t *testing.T) {
	svc := newTestService(t, nil, 0)
	for _, tt := range []struct {
		name string
		ok   bool
	}{{"ok-1", true}, {"a.b_c", true}, {"", false}, {"Upper", false}, {"-lead", false}, {"has space", false}} {
		if err := validProfileName(tt.name); (err == nil) != tt.ok {
			t.Errorf("validProfileName(%q) = %v", tt.name, err)
		}
	}
	if _, err := svc.PutProfile(context.Background(), Profile{Name: "default"}); sandbox.CodeOf(err) != sandbox.CodeConflict {
		t.Errorf("replacing the configured default profile: %v", err)
	}
}

// refusing is the process harness with every create refused by the
// backend, before any box exists.
type refusing struct {
	*process.Provider
	err error
}

func (p refusing) Create(context.Context, string, sandbox.Spec) (sandbox.Info, error) {
	return sandbox.Info{}, p.err
}

func TestRefusedCreateIsNotListed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		recorded bool // the caller is told the id (Recorded)
	}{
		{"refused with a code", sandbox.Errorf(sandbox.CodeImageNotFound, "image nope not found"), false},
		{"failed without a code", errors.New("engine unreachable"), false},
		{"refused, the id told to the caller", sandbox.Errorf(sandbox.CodeImageNotFound, "image nope not found"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, t.TempDir()+"/s.db")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{"/bin/false"}})
			if err != nil {
				t.Fatal(err)
			}
			svc, err := New(Config{Store: st, Backends: map[string]sandbox.Provider{"process": refusing{p, tc.err}}, DefaultBackend: "process",
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			req := CreateRequest{}
			var told []store.Sandbox
			if tc.recorded {
				req.Recorded = func(rec store.Sandbox) { told = append(told, rec) }
			}
			rec, err := svc.Create(ctx, req)
			if !errors.Is(err, tc.err) || sandbox.CodeOf(err) != sandbox.CodeOf(tc.err) {
				t.Fatalf("create: %v, want the backend's %v", err, tc.err)
			}
			if rec == nil || rec.State != sandbox.StateFailed || !strings.HasPrefix(rec.Reason, "provision_failed: ") {
				t.Fatalf("returned record %+v", rec)
			}
			// The failure is in the sandbox's events either way.
			evs, err := svc.Events(ctx, rec.ID, 0)
			if err != nil || len(evs) == 0 || evs[len(evs)-1].State != sandbox.StateFailed {
				t.Fatalf("events %+v %v, want the last Failed", evs, err)
			}
			got, getErr := svc.Get(ctx, rec.ID)
			if tc.recorded {
				// The caller's clients know the id: they see the failure.
				if len(told) != 1 || getErr != nil || got.State != sandbox.StateFailed {
					t.Fatalf("told %d, get %+v %v; want the Failed record kept", len(told), got, getErr)
				}
				return
			}
			if sandbox.CodeOf(getErr) != sandbox.CodeSandboxNotFound {
				t.Fatalf("get of the refused create: %+v %v, want not found", got, getErr)
			}
			for _, f := range []store.ListFilter{{}, {AllPools: true}, {States: []sandbox.State{sandbox.StateFailed}}} {
				if recs, total, err := svc.List(ctx, f); err != nil || total != 0 || len(recs) != 0 {
					t.Fatalf("list %+v: %d (total %d) %v, want none", f, len(recs), total, err)
				}
			}
		})
	}
}
