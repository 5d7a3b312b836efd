package sqlite_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/store/storetest"
)

// open opens a store in a new file under t's temp dir.
func open(t *testing.T) store.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "astrabox.db"))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func TestStore(t *testing.T) {
	storetest.Run(t, open)
}

func TestSurvivesReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "astrabox.db")
	ctx := t.Context()
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	rec := &store.Sandbox{ID: "box", Backend: "native", State: sandbox.StateRunning, Metadata: map[string]string{"k": "v"}}
	if err := s.CreateSandbox(ctx, rec); err != nil {
		t.Fatalf("create: %v", err)
	}
	seq, err := s.AppendEvent(ctx, store.Event{SandboxID: "box", State: sandbox.StateRunning})
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	if _, err := s.PutProfile(ctx, store.Profile{Name: "p", JSON: []byte(`{}`)}); err != nil {
		t.Fatalf("put profile: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}

	s, err = sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	got, err := s.GetSandbox(ctx, "box")
	if err != nil || got.Version != 1 || got.Metadata["k"] != "v" {
		t.Fatalf("after reopen: %+v, %v", got, err)
	}
	if _, total, err := s.ListSandboxes(ctx, store.ListFilter{Metadata: map[string]string{"k": "v"}}); err != nil || total != 1 {
		t.Errorf("metadata filter after reopen: %d, %v", total, err)
	}
	if events, err := s.Events(ctx, "box", 0); err != nil || len(events) != 1 || events[0].Seq != seq {
		t.Errorf("events after reopen: %v, %v", events, err)
	}
	if _, err := s.GetProfile(ctx, "p"); err != nil {
		t.Errorf("profile after reopen: %v", err)
	}
	// Seqs are not reused after a restart.
	next, err := s.AppendEvent(ctx, store.Event{SandboxID: "box", State: sandbox.StateTerminated})
	if err != nil || next <= seq {
		t.Errorf("seq after reopen = %d, %v; want > %d", next, err, seq)
	}
}

// TestUpgrade opens a file of the schema before the platform's tables,
// holding a profile: the migration gives it version 1 and the new tables
// work.
func TestUpgrade(t *testing.T) {
	path := filepath.Join(t.TempDir(), "astrabox.db")
	ctx := t.Context()
	if err := sqlite.MigrateTo(ctx, path, 2); err != nil {
		t.Fatalf("migrate to 2: %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = db.ExecContext(ctx, `INSERT INTO profiles (name, data, updated_at) VALUES ('old', CAST('{}' AS BLOB), 0)`)
	db.Close()
	if err != nil {
		t.Fatalf("insert a profile of schema 2: %v", err)
	}

	s, err := sqlite.Open(ctx, path)
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

// TestUpgradeOwners opens a file of the schema before owners, holding a
// sandbox, an agent and a session: they read back as the bootstrap user's
// ("admin" in org "default"), the agent private and shared with no one, and
// the owner filters select them.
func TestUpgradeOwners(t *testing.T) {
	path := filepath.Join(t.TempDir(), "astrabox.db")
	ctx := t.Context()
	if err := sqlite.MigrateTo(ctx, path, 9); err != nil {
		t.Fatalf("migrate to 9: %v", err)
	}
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO sandboxes (id, backend, profile, state, reason, image, metadata,
			created_at, updated_at, idle_timeout, last_active_at, version)
			VALUES ('old-box', 'native', 'default', 'running', '', 'debian', '{}', 0, 0, 0, 0, 1)`,
		`INSERT INTO agents (id, name, engine_kind, runtime_profile, model, instructions,
			permission_mode, tools, vault_ids, version, created_at, updated_at)
			VALUES ('old-agent', 'Old', 'claude-code', 'default', '', '', 'ask', NULL, '[]', 1, 0, 0)`,
		`INSERT INTO sessions (id, agent_id, engine_kind, state, title, current_turn_id,
			sandbox_id, native_key, created_at, updated_at, last_active_at, version)
			VALUES ('old-session', 'old-agent', 'claude-code', 'READY', '', '', '', '', 0, 0, 0, 1)`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			db.Close()
			t.Fatalf("insert a record of schema 9: %v", err)
		}
	}
	db.Close()

	s, err := sqlite.Open(ctx, path)
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

func TestFileMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "astrabox.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if err := s.CreateSandbox(t.Context(), &store.Sandbox{ID: "box"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat: %v", err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s has mode %o, want 600", filepath.Base(p), mode)
		}
	}
}

// TestSharedFile opens one file twice, as two processes would, and writes
// through both at once: busy timeouts and immediate transactions must keep
// every write from failing with SQLITE_BUSY.
func TestSharedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "astrabox.db")
	ctx := t.Context()
	var stores [2]*sqlite.Store
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for i := range stores { // opening at once also races the migrations
		wg.Go(func() {
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				errs <- err
				return
			}
			stores[i] = s
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("open: %v", err)
	}
	defer stores[0].Close()
	defer stores[1].Close()

	if err := stores[0].CreateSandbox(ctx, &store.Sandbox{ID: "shared", Metadata: map[string]string{}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	const each = 20
	werrs := make(chan error, 2*len(stores))
	for i, s := range stores {
		wg.Go(func() {
			for j := range each {
				if err := s.CreateSandbox(ctx, &store.Sandbox{ID: fmt.Sprintf("s%d-%d", i, j)}); err != nil {
					werrs <- err
					return
				}
			}
		})
		wg.Go(func() {
			for j := range each {
				if _, _, err := s.PutIdempotency(ctx, store.Idempotency{Key: fmt.Sprint("k", j)}); err != nil {
					werrs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(werrs)
	for err := range werrs {
		t.Errorf("write: %v", err)
	}
	if _, total, err := stores[1].ListSandboxes(ctx, store.ListFilter{}); err != nil || total != 2*each+1 {
		t.Errorf("list = %d, %v; want %d", total, err, 2*each+1)
	}
}

func TestOpenErrors(t *testing.T) {
	tests := []struct {
		name string
		path string
	}{
		{"empty path", ""},
		{"missing directory", filepath.Join(t.TempDir(), "missing", "astrabox.db")},
		{"a directory", t.TempDir()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if s, err := sqlite.Open(t.Context(), tc.path); err == nil {
				s.Close()
				t.Errorf("open %q succeeded", tc.path)
			}
		})
	}
}

// TestAwkwardPath opens a file whose name holds characters that URIs give a
// meaning.
func TestAwkwardPath(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?x=1#frag%41")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "astra box?.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer s.Close()
	if err := s.CreateSandbox(t.Context(), &store.Sandbox{ID: "box"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("database is not at the path given: %v", err)
	}
}
