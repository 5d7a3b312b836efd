// Package sqlite is the embedded store.Store: one SQLite database file,
// reached through a pure-Go driver (modernc.org/sqlite), so the astrabox
// binary still builds with CGO_ENABLED=0.
//
// The file is opened in WAL mode with foreign keys on and a busy timeout.
// All writes go through a single connection, so writers of one process never
// meet SQLITE_BUSY; write transactions start with BEGIN IMMEDIATE and wait out
// the busy timeout, so writers of other processes sharing the file queue
// instead of failing. Reads use a separate pool of query-only connections that
// WAL lets run beside the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	"modernc.org/sqlite"

	"github.com/astrabox/astrabox/store"
)

// busyTimeoutMillis is how long a statement waits for a lock held by another
// process before it fails with SQLITE_BUSY.
const busyTimeoutMillis = 10000

// Store is a store.Store kept in one SQLite file. It is safe for concurrent
// use; Close releases it.
type Store struct {
	w *sql.DB // exactly one connection: every write goes through it
	r *sql.DB // query-only connections for reads

	closeOnce sync.Once
	closeErr  error
}

var _ store.Store = (*Store)(nil)

// Open opens the database file at path, creating it with mode 0600 when it
// does not exist (its directory must exist), and applies any pending schema
// migration. ctx governs opening and migrating only. The caller closes the
// Store.
func Open(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("open sqlite store: empty path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	// SQLite would create the file with the umask's mode; create it first so
	// that it, and the -wal and -shm files SQLite gives the same mode, are 0600.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}

	w, err := openDB(abs, url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis),
			"journal_mode(WAL)",
			"foreign_keys(1)",
			// In WAL mode NORMAL never corrupts the file and loses no
			// committed transaction when the process dies; only a power
			// loss can undo the last ones, whose boxes the reconciler then
			// finds as orphans and removes. FULL would fsync every write.
			"synchronous(NORMAL)",
		},
		"_txlock": {"immediate"},
	})
	if err != nil {
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	if err := pingBusy(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	if err := migrateSchema(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}

	r, err := openDB(abs, url.Values{
		"_pragma": {
			fmt.Sprintf("busy_timeout(%d)", busyTimeoutMillis),
			"foreign_keys(1)",
			"query_only(1)",
		},
	})
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	readers := max(4, runtime.GOMAXPROCS(0))
	r.SetMaxOpenConns(readers)
	r.SetMaxIdleConns(readers)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open sqlite store: %w", err)
	}
	return &Store{w: w, r: r}, nil
}

// pingBusy opens the first connection, retrying while another process
// holds the lock that switching the file to WAL needs (SQLite answers that
// with SQLITE_BUSY at once instead of waiting out the busy timeout).
func pingBusy(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(busyTimeoutMillis * time.Millisecond)
	for {
		err := db.PingContext(ctx)
		if err == nil || !strings.Contains(err.Error(), "SQLITE_BUSY") || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// openDB returns a pool of connections to the file at the absolute path abs,
// each configured by the driver's DSN parameters params.
func openDB(abs string, params url.Values) (*sql.DB, error) {
	// A file: URI keeps the path apart from the parameters; the characters
	// that URIs give a meaning are escaped in the path.
	escaped := strings.NewReplacer("%", "%25", "?", "%3f", "#", "%23").Replace(abs)
	c, err := sqlite.NewConnector("file:" + escaped + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// Ping checks that both the writer and a reader connection answer.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.w.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite store: %w", err)
	}
	if err := s.r.PingContext(ctx); err != nil {
		return fmt.Errorf("ping sqlite store: %w", err)
	}
	return nil
}

// Close closes every connection; calls after the first return its result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeErr = errors.Join(s.r.Close(), s.w.Close())
		if s.closeErr != nil {
			s.closeErr = fmt.Errorf("close sqlite store: %w", s.closeErr)
		}
	})
	return s.closeErr
}

// missOrConflict explains why a write conditional on version changed no
// row of key: ErrNotFound when exists (a query selecting one row for key)
// finds none, ErrConflict otherwise. It reads through the writer, which
// saw the write's outcome.
func (st *Store) missOrConflict(ctx context.Context, op, exists, key string, version int64) error {
	var one int
	err := st.w.QueryRowContext(ctx, exists, key).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("%s %s: %w", op, key, store.ErrNotFound)
	case err != nil:
		return fmt.Errorf("%s: %w", op, err)
	}
	return fmt.Errorf("%s %s version %d: %w", op, key, version, store.ErrConflict)
}

// execOne runs a write that must change a row: when it changes none, the
// answer is miss (ErrConflict for an insert that found its key taken,
// ErrNotFound for an update or delete that found no row), named by op and
// key.
func (st *Store) execOne(ctx context.Context, op, key string, miss error, query string, args ...any) error {
	res, err := st.w.ExecContext(ctx, query, args...)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if n == 0 {
		if key == "" {
			return fmt.Errorf("%s: %w", op, miss)
		}
		return fmt.Errorf("%s %s: %w", op, key, miss)
	}
	return nil
}
