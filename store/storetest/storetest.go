// Package storetest is the conformance suite of store.Store: every
// implementation (store/sqlite, store/postgres) passes Run unchanged.
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// Run runs the suite. Every subtest calls open for a new, empty store and
// closes that store when it ends; open fails t when it cannot open one and
// registers with t.Cleanup whatever else it must remove (a temp file, a
// database), which then runs after the store is closed.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(*testing.T, store.Store)
	}{
		{"SandboxRoundTrip", testSandboxRoundTrip},
		{"CreateConflict", testCreateConflict},
		{"NotFound", testNotFound},
		{"DeleteAndRecreate", testDeleteAndRecreate},
		{"Update", testUpdate},
		{"UpdateStaleVersion", testUpdateStaleVersion},
		{"UpdateRace", testUpdateRace},
		{"List", testList},
		{"ListPaging", testListPaging},
		{"CountActive", testCountActive},
		{"Events", testEvents},
		{"EventsFollow", testEventsFollow},
		{"Idempotency", testIdempotency},
		{"IdempotencyRace", testIdempotencyRace},
		{"IdempotencyExpiry", testIdempotencyExpiry},
		{"IdempotencyReserve", testIdempotencyReserve},
		{"Profiles", testProfiles},
		{"ProfileVersions", testProfileVersions},
		{"ProfileRace", testProfileRace},
		{"Agents", testAgents},
		{"AgentUpdate", testAgentUpdate},
		{"AgentList", testAgentList},
		{"Vaults", testVaults},
		{"VaultUpdate", testVaultUpdate},
		{"VaultList", testVaultList},
		{"SandboxVaults", testSandboxVaults},
		{"SandboxVaultRace", testSandboxVaultRace},
		{"Sessions", testSessions},
		{"SessionUpdate", testSessionUpdate},
		{"SessionList", testSessionList},
		{"DeleteSession", testDeleteSession},
		{"AcceptInput", testAcceptInput},
		{"InputState", testInputState},
		{"AcceptInputRace", testAcceptInputRace},
		{"StreamAppend", testStreamAppend},
		{"StreamConcurrentAppend", testStreamConcurrentAppend},
		{"StreamEntryOfType", testStreamEntryOfType},
		{"SandboxStreamRetention", testSandboxStreamRetention},
		{"LeaseFencing", testLeaseFencing},
		{"LeaseExpiry", testLeaseExpiry},
		{"LeaseRace", testLeaseRace},
		{"NativeState", testNativeState},
		{"NativeStateLarge", testNativeStateLarge},
		{"Executions", testExecutions},
		{"Users", testUsers},
		{"UserUpdate", testUserUpdate},
		{"UserList", testUserList},
		{"APIKeys", testAPIKeys},
		{"Audit", testAudit},
		{"WebSessions", testWebSessions},
		{"ResourceOwners", testResourceOwners},
		{"ResourceOwnerRace", testResourceOwnerRace},
		{"Concurrent", testConcurrent},
		{"CreateRace", testCreateRace},
		{"Pools", testPools},
		{"ClaimRace", testClaimRace},
		{"CanceledContext", testCanceledContext},
		{"Ping", testPing},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("close: %v", err)
				}
			})
			tc.fn(t, s)
		})
	}
}

// t0 is the suite's reference time: not UTC and finer than a microsecond,
// so that a store must convert to UTC and may round.
var t0 = time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.FixedZone("UTC+3", 3*3600))

// at returns t0 plus d.
func at(d time.Duration) time.Time { return t0.Add(d) }

// ptr returns a pointer to t.
func ptr(t time.Time) *time.Time { return &t }

// newSandbox returns a complete record with the given id; each mod then
// changes it.
func newSandbox(id string, mods ...func(*store.Sandbox)) *store.Sandbox {
	s := &store.Sandbox{
		ID:            id,
		Backend:       "native",
		Profile:       "default",
		State:         sandbox.StateRunning,
		Reason:        "started",
		Image:         "debian:12",
		Spec:          []byte(`{"image":"debian:12","resources":{"cpu":"1"}}`),
		Metadata:      map[string]string{"owner": "alice", "team": "core"},
		Entrypoint:    []string{"/bin/sh", "-c", "sleep infinity"},
		CreatedAt:     t0,
		UpdatedAt:     at(time.Second),
		ExpiresAt:     ptr(at(time.Hour)),
		IdleTimeout:   10 * time.Minute,
		LastActiveAt:  at(2 * time.Second),
		ProviderState: []byte{0, 1, 2, 0xff, 0},
		Instance:      "native:host-a:0011",
		OwnerID:       "user-alice",
		OrgID:         "org-1",
	}
	for _, m := range mods {
		m(s)
	}
	return s
}

// sameTime reports whether got is want read back from a store: in UTC and
// within a millisecond.
func sameTime(got, want time.Time) bool {
	if got.Location() != time.UTC {
		return false
	}
	d := got.Sub(want)
	return d > -time.Millisecond && d < time.Millisecond
}

// sameTimePtr reports whether two optional times are both absent or
// sameTime.
func sameTimePtr(got, want *time.Time) bool {
	if got == nil || want == nil {
		return got == nil && want == nil
	}
	return sameTime(*got, *want)
}

// checkTime fails t unless sameTime(got, want).
func checkTime(t *testing.T, what string, got, want time.Time) {
	t.Helper()
	if !sameTime(got, want) {
		t.Errorf("%s = %v (%v), want %v in UTC", what, got, got.Location(), want)
	}
}

// sandboxDiff lists how got, a record read from a store, differs from
// want. nil and empty slices and maps are equal; got must have a non-nil
// Metadata.
func sandboxDiff(got, want *store.Sandbox) []string {
	var d []string
	add := func(field string, g, w any) { d = append(d, fmt.Sprintf("%s = %v, want %v", field, g, w)) }
	if got.ID != want.ID {
		add("ID", got.ID, want.ID)
	}
	if got.Backend != want.Backend {
		add("Backend", got.Backend, want.Backend)
	}
	if got.Profile != want.Profile {
		add("Profile", got.Profile, want.Profile)
	}
	if got.State != want.State {
		add("State", got.State, want.State)
	}
	if got.Reason != want.Reason {
		add("Reason", got.Reason, want.Reason)
	}
	if got.Image != want.Image {
		add("Image", got.Image, want.Image)
	}
	if !bytes.Equal(got.Spec, want.Spec) {
		add("Spec (len)", len(got.Spec), len(want.Spec))
	}
	if got.Metadata == nil {
		d = append(d, "Metadata is nil, want a non-nil map")
	}
	if !maps.Equal(got.Metadata, want.Metadata) {
		add("Metadata", got.Metadata, want.Metadata)
	}
	if !slices.Equal(got.Entrypoint, want.Entrypoint) {
		add("Entrypoint", got.Entrypoint, want.Entrypoint)
	}
	for _, f := range []struct {
		name      string
		got, want time.Time
	}{
		{"CreatedAt", got.CreatedAt, want.CreatedAt},
		{"UpdatedAt", got.UpdatedAt, want.UpdatedAt},
		{"LastActiveAt", got.LastActiveAt, want.LastActiveAt},
	} {
		if !sameTime(f.got, f.want) {
			add(f.name, f.got, f.want)
		}
	}
	switch {
	case (got.ExpiresAt == nil) != (want.ExpiresAt == nil):
		add("ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	case got.ExpiresAt != nil && !sameTime(*got.ExpiresAt, *want.ExpiresAt):
		add("ExpiresAt", *got.ExpiresAt, *want.ExpiresAt)
	}
	if got.IdleTimeout != want.IdleTimeout {
		add("IdleTimeout", got.IdleTimeout, want.IdleTimeout)
	}
	if !bytes.Equal(got.ProviderState, want.ProviderState) {
		add("ProviderState", got.ProviderState, want.ProviderState)
	}
	if got.Pool != want.Pool {
		add("Pool", got.Pool, want.Pool)
	}
	if got.Instance != want.Instance {
		add("Instance", got.Instance, want.Instance)
	}
	if got.OwnerID != want.OwnerID {
		add("OwnerID", got.OwnerID, want.OwnerID)
	}
	if got.OrgID != want.OrgID {
		add("OrgID", got.OrgID, want.OrgID)
	}
	if got.Version != want.Version {
		add("Version", got.Version, want.Version)
	}
	return d
}

// checkSandbox fails t when got differs from want.
func checkSandbox(t *testing.T, got, want *store.Sandbox) {
	t.Helper()
	for _, d := range sandboxDiff(got, want) {
		t.Errorf("sandbox %s: %s", want.ID, d)
	}
}

// mustCreate creates s or fails t.
func mustCreate(t *testing.T, st store.Store, s *store.Sandbox) {
	t.Helper()
	if err := st.CreateSandbox(t.Context(), s); err != nil {
		t.Fatalf("create %s: %v", s.ID, err)
	}
}

// mustGet gets id or fails t.
func mustGet(t *testing.T, st store.Store, id string) *store.Sandbox {
	t.Helper()
	s, err := st.GetSandbox(t.Context(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return s
}

// checkErr fails t unless errors.Is(err, want).
func checkErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: error %v, want %v", what, err, want)
	}
}

// ids returns the IDs of ss in order.
func ids(ss []*store.Sandbox) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.ID
	}
	return out
}

// canceled returns a context that is already canceled.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
