package bench

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/astrabox/astrabox/identity"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/sqlite"
)

// AuthConfig configures RunAuth.
type AuthConfig struct {
	// N is how many requests each scenario authenticates.
	N int
	// Dir holds the SQLite database.
	Dir string
	// PostgresDSN, when set, adds the cache-miss rows on PostgreSQL.
	PostgresDSN string
}

// RunAuth measures what authentication adds to one request: a per-user
// key found in the Authenticator's cache, the same key read from the
// store (a cache miss: the key and its user, every request), and a
// browser session cookie, each beside the single API key of before
// identity (SHA-256 and a constant-time compare), in the same run.
func RunAuth(ctx context.Context, cfg AuthConfig) (Report, error) {
	rep := Report{Title: "Authentication per request (µs)", Date: time.Now()}
	bootstrap := "bench-bootstrap-key-0123456789abcdef"
	want := sha256.Sum256([]byte(bootstrap))
	single := timeEach(cfg.N, func() error {
		got := sha256.Sum256([]byte(bootstrap))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			return fmt.Errorf("the single key did not match")
		}
		return nil
	})
	stores := []struct {
		name string
		open func() (store.Store, error)
	}{{"SQLite", func() (store.Store, error) { return sqlite.Open(ctx, filepath.Join(cfg.Dir, "auth.db")) }}}
	if cfg.PostgresDSN != "" {
		stores = append(stores, struct {
			name string
			open func() (store.Store, error)
		}{"PostgreSQL", func() (store.Store, error) { return postgres.Open(ctx, cfg.PostgresDSN) }})
	}
	for i, s := range stores {
		st, err := s.open()
		if err != nil {
			return rep, fmt.Errorf("open %s: %w", s.name, err)
		}
		rows, err := authRows(ctx, st, s.name, i == 0, cfg.N, want, single)
		st.Close()
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

// authRows measures one store's scenarios (the cache hits once only).
func authRows(ctx context.Context, st store.Store, name string, hits bool, n int, bootstrapHash [32]byte, single []time.Duration) ([]Row, error) {
	user := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	if err := st.CreateUser(ctx, &store.User{ID: user, Kind: "service", Role: "member", OrgID: identity.DefaultOrgID}); err != nil {
		return nil, fmt.Errorf("create user: %w", err)
	}
	id, key, hash := identity.NewKey()
	if err := st.CreateAPIKey(ctx, &store.APIKey{ID: id, UserID: user, Name: "bench", SecretHash: hash[:],
		Scopes: []string{"read", "write"}}); err != nil {
		return nil, fmt.Errorf("create key: %w", err)
	}
	cached := identity.New(identity.Config{Records: st, BootstrapKeyHash: bootstrapHash, TTL: time.Hour})
	uncached := identity.New(identity.Config{Records: st, BootstrapKeyHash: bootstrapHash, TTL: time.Nanosecond})
	cookie, _, err := cached.StartWebSession(ctx, user, "bench-flow-"+user, time.Hour)
	if err != nil {
		return nil, err
	}
	auth := func(a *identity.Authenticator, k string) func() error {
		return func() error { _, err := a.Authenticate(ctx, k); return err }
	}
	var rows []Row
	add := func(scenario string, ds []time.Duration) {
		for _, p := range []float64{0.50, 0.99} {
			rows = append(rows, Row{Scenario: fmt.Sprintf("%s, p%d", scenario, int(p*100)), Unit: "µs",
				Subject: pctMicros(ds, p), Alternative: pctMicros(single, p), AltName: "single key"})
		}
	}
	if hits {
		if err := auth(cached, key)(); err != nil { // fill the cache
			return nil, err
		}
		add("per-user key, cache hit", timeEach(n, auth(cached, key)))
		_, _ = cached.AuthenticateWebSession(ctx, cookie)
		add("browser session, cache hit", timeEach(n, func() error { _, err := cached.AuthenticateWebSession(ctx, cookie); return err }))
	}
	add("per-user key, cache miss ("+name+")", timeEach(max(n/10, 100), auth(uncached, key)))
	return rows, nil
}

// timeEach runs fn n times and returns each call's duration; a failure
// ends the run early (its durations so far are returned).
func timeEach(n int, fn func() error) []time.Duration {
	ds := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := fn(); err != nil {
			return ds
		}
		ds = append(ds, time.Since(start))
	}
	return ds
}

// pctMicros returns the nearest-rank percentile p of ds in microseconds.
func pctMicros(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := max(0, min(int(p*float64(len(s))+0.5)-1, len(s)-1))
	return float64(s[i].Nanoseconds()) / 1000
}
