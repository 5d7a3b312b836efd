package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// increment adds one to the "n" metadata of sandbox id by read, change,
// update, retrying on ErrConflict; it returns how many tries it took.
func increment(ctx context.Context, st store.Store, id string) (int, error) {
	for try := 1; ; try++ {
		s, err := st.GetSandbox(ctx, id)
		if err != nil {
			return try, err
		}
		n, _ := strconv.Atoi(s.Metadata["n"])
		s.Metadata["n"] = strconv.Itoa(n + 1)
		err = st.UpdateSandbox(ctx, s)
		if !errors.Is(err, store.ErrConflict) {
			return try, err
		}
		if try == 1000 {
			return try, fmt.Errorf("still conflicting after %d tries: %w", try, err)
		}
	}
}

// testConcurrent has goroutines create and update their own records while
// all of them increment one shared record and read lists: no write may be
// lost and no call may fail (SQLITE_BUSY, serialization errors).
func testConcurrent(t *testing.T, st store.Store) {
	ctx := t.Context()
	const workers, own, updates, increments = 8, 6, 3, 10
	mustCreate(t, st, newSandbox("shared", func(s *store.Sandbox) { s.Metadata = map[string]string{"n": "0"} }))

	var wg sync.WaitGroup
	errs := make(chan error, workers*2)
	for w := range workers {
		wg.Go(func() {
			err := func() error {
				for i := range own {
					id := fmt.Sprintf("w%d-%d", w, i)
					s := newSandbox(id, func(s *store.Sandbox) { s.Metadata = map[string]string{"worker": strconv.Itoa(w)} })
					if err := st.CreateSandbox(ctx, s); err != nil {
						return err
					}
					for u := range updates {
						s.Reason = fmt.Sprint("update ", u)
						if err := st.UpdateSandbox(ctx, s); err != nil {
							return err
						}
					}
					if _, err := st.AppendEvent(ctx, store.Event{SandboxID: id, State: sandbox.StateRunning, At: t0}); err != nil {
						return err
					}
					if _, err := increment(ctx, st, "shared"); err != nil {
						return err
					}
				}
				for range increments - own {
					if _, err := increment(ctx, st, "shared"); err != nil {
						return err
					}
				}
				return nil
			}()
			if err != nil {
				errs <- fmt.Errorf("worker %d: %w", w, err)
			}
		})
		wg.Go(func() { // a reader beside each writer
			for range own {
				if _, _, err := st.ListSandboxes(ctx, store.ListFilter{Metadata: map[string]string{"worker": strconv.Itoa(w)}}); err != nil {
					errs <- fmt.Errorf("reader %d: %w", w, err)
					return
				}
				if _, err := st.CountActive(ctx, ""); err != nil {
					errs <- fmt.Errorf("reader %d: %w", w, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}

	shared := mustGet(t, st, "shared")
	if shared.Metadata["n"] != strconv.Itoa(workers*increments) || shared.Version != workers*increments+1 {
		t.Errorf("shared record: n = %s, version %d; want %d, %d (lost updates)",
			shared.Metadata["n"], shared.Version, workers*increments, workers*increments+1)
	}
	for w := range workers {
		got, total, err := st.ListSandboxes(ctx, store.ListFilter{Metadata: map[string]string{"worker": strconv.Itoa(w)}})
		if err != nil || total != own {
			t.Fatalf("records of worker %d: %d, %v; want %d", w, total, err, own)
		}
		for _, s := range got {
			if s.Version != updates+1 || s.Reason != fmt.Sprint("update ", updates-1) {
				t.Errorf("%s: version %d reason %q", s.ID, s.Version, s.Reason)
			}
		}
	}
	if n, err := st.CountActive(ctx, "native"); err != nil || n != workers*own+1 {
		t.Errorf("CountActive = %d, %v; want %d", n, err, workers*own+1)
	}
}

// testCreateRace creates one id from many goroutines: exactly one succeeds,
// the others get ErrConflict.
func testCreateRace(t *testing.T, st store.Store) {
	ctx := t.Context()
	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = st.CreateSandbox(ctx, newSandbox("box", func(s *store.Sandbox) { s.Reason = strconv.Itoa(i) }))
		})
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Errorf("creates %d and %d both succeeded", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, store.ErrConflict):
			t.Errorf("create %d: %v, want nil or ErrConflict", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no create succeeded")
	}
	if got := mustGet(t, st, "box"); got.Reason != strconv.Itoa(won) || got.Version != 1 {
		t.Errorf("stored reason %q version %d, want %q version 1", got.Reason, got.Version, strconv.Itoa(won))
	}
}

// testCanceledContext calls every method with a canceled context: each
// fails with an error that wraps context.Canceled.
func testCanceledContext(t *testing.T, st store.Store) {
	mustCreate(t, st, newSandbox("box"))
	if err := st.CreateAgent(t.Context(), newAgent("a")); err != nil {
		t.Fatalf("create agent: %v", err)
	}
	if err := st.CreateVault(t.Context(), newVault("v")); err != nil {
		t.Fatalf("create vault: %v", err)
	}
	mustCreateSession(t, st, newSession("s"))
	mustAccept(t, st, &store.Input{ID: "in", SessionID: "s"})
	ctx := canceled()
	calls := []struct {
		name string
		call func() error
	}{
		{"CreateSandbox", func() error { return st.CreateSandbox(ctx, newSandbox("other")) }},
		{"GetSandbox", func() error { _, err := st.GetSandbox(ctx, "box"); return err }},
		{"UpdateSandbox", func() error {
			return st.UpdateSandbox(ctx, newSandbox("box", func(s *store.Sandbox) { s.Version = 1 }))
		}},
		{"DeleteSandbox", func() error { return st.DeleteSandbox(ctx, "box") }},
		{"ListSandboxes", func() error { _, _, err := st.ListSandboxes(ctx, store.ListFilter{}); return err }},
		{"CountActive", func() error { _, err := st.CountActive(ctx, ""); return err }},
		{"AppendEvent", func() error { _, err := st.AppendEvent(ctx, store.Event{SandboxID: "box"}); return err }},
		{"Events", func() error { _, err := st.Events(ctx, "box", 0); return err }},
		{"PutIdempotency", func() error { _, _, err := st.PutIdempotency(ctx, store.Idempotency{Key: "k"}); return err }},
		{"CompleteIdempotency", func() error { return st.CompleteIdempotency(ctx, store.Idempotency{Key: "k"}) }},
		{"DeleteIdempotency", func() error { return st.DeleteIdempotency(ctx, "k") }},
		{"DeleteIdempotencyBefore", func() error { return st.DeleteIdempotencyBefore(ctx, t0) }},
		{"PutProfile", func() error { _, err := st.PutProfile(ctx, store.Profile{Name: "p"}); return err }},
		{"GetProfile", func() error { _, err := st.GetProfile(ctx, "p"); return err }},
		{"ListProfiles", func() error { _, err := st.ListProfiles(ctx); return err }},
		{"DeleteProfile", func() error { return st.DeleteProfile(ctx, "p") }},
		{"CreateAgent", func() error { return st.CreateAgent(ctx, newAgent("other")) }},
		{"GetAgent", func() error { _, err := st.GetAgent(ctx, "a"); return err }},
		{"UpdateAgent", func() error { return st.UpdateAgent(ctx, newAgent("a", func(a *store.Agent) { a.Version = 1 })) }},
		{"DeleteAgent", func() error { return st.DeleteAgent(ctx, "a") }},
		{"ListAgents", func() error { _, err := st.ListAgents(ctx, "", 0); return err }},
		{"CreateVault", func() error { return st.CreateVault(ctx, newVault("other")) }},
		{"GetVault", func() error { _, err := st.GetVault(ctx, "v"); return err }},
		{"UpdateVault", func() error { return st.UpdateVault(ctx, newVault("v", func(v *store.Vault) { v.Version = 1 })) }},
		{"DeleteVault", func() error { return st.DeleteVault(ctx, "v") }},
		{"ListVaults", func() error { _, err := st.ListVaults(ctx, "", 0); return err }},
		{"CreateSession", func() error { return st.CreateSession(ctx, newSession("other")) }},
		{"GetSession", func() error { _, err := st.GetSession(ctx, "s"); return err }},
		{"UpdateSession", func() error {
			return st.UpdateSession(ctx, newSession("s", func(s *store.Session) { s.Version = 1 }))
		}},
		{"DeleteSession", func() error { return st.DeleteSession(ctx, "s") }},
		{"ListSessions", func() error { _, err := st.ListSessions(ctx, store.SessionFilter{}); return err }},
		{"AcceptInput", func() error {
			_, _, err := st.AcceptInput(ctx, &store.Input{ID: "in-2", SessionID: "s"}, store.LogEntry{Type: "input.accepted"})
			return err
		}},
		{"GetInput", func() error { _, err := st.GetInput(ctx, "in"); return err }},
		{"ListInputs", func() error { _, err := st.ListInputs(ctx, "s"); return err }},
		{"SetInputState", func() error { _, err := st.SetInputState(ctx, "in", store.InputFailed, "X"); return err }},
		{"Append", func() error { _, err := st.Append(ctx, "s", 0, []store.LogEntry{{Type: "x"}}); return err }},
		{"ReadStream", func() error { _, err := st.ReadStream(ctx, "s", 0, 0); return err }},
		{"StreamHead", func() error { _, err := st.StreamHead(ctx, "s"); return err }},
		{"LastSource", func() error { _, err := st.LastSource(ctx, "s"); return err }},
		{"AcquireLease", func() error { _, err := st.AcquireLease(ctx, "s", "h", time.Minute); return err }},
		{"RenewLease", func() error { _, err := st.RenewLease(ctx, "s", "h", 1, time.Minute); return err }},
		{"ReleaseLease", func() error { return st.ReleaseLease(ctx, "s", "h", 1) }},
		{"GetLease", func() error { _, err := st.GetLease(ctx, "s"); return err }},
		{"AppendNativeState", func() error { _, err := st.AppendNativeState(ctx, "s", 0, 0, []byte("x")); return err }},
		{"NativeState", func() error { _, err := st.NativeState(ctx, "s"); return err }},
		{"ResetNativeState", func() error { return st.ResetNativeState(ctx, "s", 0) }},
		{"SetOwner", func() error {
			return st.SetOwner(ctx, &store.ResourceOwner{Kind: store.ResourceVolume, Backend: "b", Name: "v", OwnerID: "u"})
		}},
		{"GetOwner", func() error { _, err := st.GetOwner(ctx, store.ResourceVolume, "b", "v"); return err }},
		{"ListOwned", func() error { _, err := st.ListOwned(ctx, store.ResourceVolume, ""); return err }},
		{"DeleteOwner", func() error { return st.DeleteOwner(ctx, store.ResourceVolume, "b", "v") }},
		{"Ping", func() error { return st.Ping(ctx) }},
	}
	for _, c := range calls {
		checkErr(t, c.name, c.call(), context.Canceled)
	}
	// Nothing was done, and the store still works.
	if got := mustGet(t, st, "box"); got.Version != 1 {
		t.Errorf("version after canceled update = %d, want 1", got.Version)
	}
	if _, err := st.GetSandbox(t.Context(), "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a canceled create stored its record: %v", err)
	}
	if a := mustGetAgent(t, st, "a"); a.Version != 1 {
		t.Errorf("agent version after a canceled update = %d, want 1", a.Version)
	}
	if s := mustGetSession(t, st, "s"); s.Version != 1 {
		t.Errorf("session version after a canceled update = %d, want 1", s.Version)
	}
	if head, err := st.StreamHead(t.Context(), "s"); err != nil || head != 1 {
		t.Errorf("head after canceled appends = %d, %v; want 1", head, err)
	}
	if in, err := st.GetInput(t.Context(), "in"); err != nil || in.State != store.InputAccepted {
		t.Errorf("input after a canceled state change: %+v, %v", in, err)
	}
}

func testPing(t *testing.T, st store.Store) {
	if err := st.Ping(t.Context()); err != nil {
		t.Errorf("ping: %v", err)
	}
}
