package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/postgres"
	"github.com/astrabox/astrabox/store/storetest"
)

// adminDSN returns the DSN of a server where the tests may create
// databases, from ASTRABOX_TEST_POSTGRES; without it the test is skipped
// (failed in CI).
func adminDSN(t *testing.T) string {
	t.Helper()
	dsn := os.Getenv("ASTRABOX_TEST_POSTGRES")
	testenv.Need(t, dsn != "", "PostgreSQL (set ASTRABOX_TEST_POSTGRES)")
	return dsn
}

// withDatabase returns dsn naming database name instead of its own.
func withDatabase(t *testing.T, dsn, name string) string {
	t.Helper()
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatalf("parse ASTRABOX_TEST_POSTGRES: %v", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String()
	}
	return dsn + " dbname=" + name // key=value form: the last setting wins
}

// freshDatabase creates an empty database with a random name, dropped when t
// ends, and returns its DSN.
func freshDatabase(t *testing.T) string {
	t.Helper()
	admin := adminDSN(t)
	b := make([]byte, 8)
	rand.Read(b)
	name := "astrabox_test_" + hex.EncodeToString(b)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		t.Fatalf("connect to ASTRABOX_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	// UTF8 and the C locale whatever the cluster's defaults, which depend on
	// the locale of the machine that ran initdb.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+
		" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"); err != nil {
		t.Fatalf("create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, admin)
		if err != nil {
			t.Errorf("connect to drop database: %v", err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("drop database: %v", err)
		}
	})
	return withDatabase(t, admin, name)
}

// open opens a store on a fresh database.
func open(t *testing.T) store.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), freshDatabase(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	adminDSN(t)
	storetest.Run(t, open)
}

// TestConcurrentOpen opens one new database from several goroutines at
// once, as replicas starting together would: the advisory lock lets each
// migration run once and every Open succeed.
func TestConcurrentOpen(t *testing.T) {
	dsn := freshDatabase(t)
	const n = 6
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	if err := stores[0].CreateSandbox(t.Context(), &store.Sandbox{ID: "box", State: sandbox.StateRunning}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := stores[n-1].GetSandbox(t.Context(), "box"); err != nil {
		t.Errorf("get through another store: %v", err)
	}
}

func TestSurvivesReopen(t *testing.T) {
	dsn := freshDatabase(t)
	ctx := t.Context()
	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if err := s.CreateSandbox(ctx, &store.Sandbox{ID: "box", Metadata: map[string]string{"k": "v"}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	seq, err := s.AppendEvent(ctx, store.Event{SandboxID: "box", State: sandbox.StateRunning})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s, err = postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if got, err := s.GetSandbox(ctx, "box"); err != nil || got.Metadata["k"] != "v" {
		t.Errorf("after reopen: %+v, %v", got, err)
	}
	if next, err := s.AppendEvent(ctx, store.Event{SandboxID: "box", State: sandbox.StateTerminated}); err != nil || next <= seq {
		t.Errorf("seq after reopen = %d, %v; want > %d", next, err, seq)
	}
}

// TestUpgrade opens a database of the schema before the platform's tables,
// holding a profile: the migration gives it version 1 and the new tables
// work.
func TestUpgrade(t *testing.T) {
	dsn := freshDatabase(t)
	ctx := t.Context()
	if err := postgres.MigrateTo(ctx, dsn, 2); err != nil {
		t.Fatalf("migrate to 2: %v", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = conn.Exec(ctx, `INSERT INTO profiles (name, data, updated_at) VALUES ('old', '{}', now())`)
	conn.Close(ctx)
	if err != nil {
		t.Fatalf("insert a profile of schema 2: %v", err)
	}

	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if p, err := s.GetProfile(ctx, "old"); err != nil || p.Version != 1 || string(p.JSON) != "{}" {
		t.Fatalf("profile after upgrade = %+v, %v; want version 1", p, err)
	}
	if p, err := s.PutProfile(ctx, store.Profile{Name: "old", JSON: []byte(`{"v":2}`), Version: 1}); err != nil || p.Version != 2 {
		t.Errorf("conditional put after upgrade = %+v, %v; want version 2", p, err)
	}
	if err := s.CreateSession(ctx, &store.Session{ID: "s"}); err != nil {
		t.Errorf("create session after upgrade: %v", err)
	}
}

// TestUpgradeOwners opens a database of the schema before owners, holding a
// sandbox, an agent and a session: they read back as the bootstrap user's
// ("admin" in org "default"), the agent private and shared with no one, and
// the owner filters select them.
func TestUpgradeOwners(t *testing.T) {
	dsn := freshDatabase(t)
	ctx := t.Context()
	if err := postgres.MigrateTo(ctx, dsn, 9); err != nil {
		t.Fatalf("migrate to 9: %v", err)
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sandboxes (id, backend, profile, state, reason, image, created_at,
			updated_at, idle_timeout, last_active_at, version)
			VALUES ('old-box', 'native', 'default', 'running', '', 'debian', now(), now(), 0, now(), 1)`,
		`INSERT INTO agents (id, name, engine_kind, runtime_profile, model, instructions,
			permission_mode, tools, vault_ids, version, created_at, updated_at)
			VALUES ('old-agent', 'Old', 'claude-code', 'default', '', '', 'ask', NULL, '{}', 1, now(), now())`,
		`INSERT INTO sessions (id, agent_id, engine_kind, state, title, current_turn_id,
			sandbox_id, native_key, created_at, updated_at, last_active_at, version)
			VALUES ('old-session', 'old-agent', 'claude-code', 'READY', '', '', '', '', now(), now(), now(), 1)`,
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			conn.Close(ctx)
			t.Fatalf("insert a record of schema 9: %v", err)
		}
	}
	conn.Close(ctx)

	s, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if b, err := s.GetSandbox(ctx, "old-box"); err != nil || b.OwnerID != "admin" || b.OrgID != "default" {
		t.Errorf("sandbox after upgrade = %+v, %v; want owner admin in org default", b, err)
	}
	if got, total, err := s.ListSandboxes(ctx, store.ListFilter{OwnerID: "admin"}); err != nil || total != 1 || len(got) != 1 {
		t.Errorf("admin's sandboxes after upgrade: %d, %v; want old-box", total, err)
	}
	a, err := s.GetAgent(ctx, "old-agent")
	if err != nil || a.OwnerID != "admin" || a.OrgID != "default" || a.Visibility != store.VisibilityPrivate ||
		a.AllowedUserIDs != nil || a.Admins != nil || a.Tools != nil || a.VaultIDs == nil {
		t.Errorf("agent after upgrade = %+v, %v; want admin's, private, shared with no one", a, err)
	}
	if sess, err := s.GetSession(ctx, "old-session"); err != nil || sess.OwnerID != "admin" || sess.OrgID != "default" {
		t.Errorf("session after upgrade = %+v, %v; want owner admin in org default", sess, err)
	}
	if got, err := s.ListSessions(ctx, store.SessionFilter{OwnerID: "admin"}); err != nil || len(got) != 1 {
		t.Errorf("admin's sessions after upgrade: %v, %v; want old-session", got, err)
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		dsn  string
	}{
		{"empty", ""},
		{"malformed", "postgres://%zz"},
		{"no server", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if s, err := postgres.Open(ctx, tc.dsn); err == nil {
				s.Close()
				t.Errorf("open %q succeeded", tc.dsn)
			}
		})
	}
}
