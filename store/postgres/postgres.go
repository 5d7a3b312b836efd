// Package postgres is the store.Store for several server replicas: records
// kept in one PostgreSQL database, reached through pgx's connection pool.
//
// Every method is a single statement or a short transaction at READ
// COMMITTED; optimistic concurrency (Version) and put-if-absent
// (idempotency) rely on row locks and unique keys, so replicas need no
// coordination of their own. A log stream's next seq and its lease share
// the stream's row: the lock an append takes on it orders the appends and
// fences them against a change of holder.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/astrabox/astrabox/store"
)

// Store is a store.Store kept in PostgreSQL. It is safe for concurrent use;
// Close releases it.
type Store struct {
	pool      *pgxpool.Pool
	closeOnce sync.Once
}

var _ store.Store = (*Store)(nil)

// Open connects to the database named by dsn (a URL or key=value string as
// libpq and pgx accept it, including pool_* settings), checks that it
// answers and applies any pending schema migration. Several processes may
// open one database at once: migrations are serialized by an advisory lock.
// ctx governs connecting and migrating only. The caller closes the Store.
//
// As with libpq, the driver fills settings the DSN leaves out from the PG*
// environment variables and the password file.
func Open(ctx context.Context, dsn string) (*Store, error) {
	if dsn == "" {
		return nil, errors.New("open postgres store: empty dsn")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	boundIdleTransactions(cfg.ConnConfig.RuntimeParams)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	if err := migrateSchema(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	return &Store{pool: pool}, nil
}

// IdleTransactionTimeout is how long the server lets one of the Store's
// connections sit idle inside a transaction before it ends the session,
// rolling the transaction back (idle_in_transaction_session_timeout). A
// replica frozen or cut off between two statements of a transaction (say,
// after an Append's fenced update of a stream's row, before its commit)
// would otherwise hold that row's lock for as long as its TCP connection
// looks alive, and the replica taking its Sessions over would wait on the
// lock forever. Every transaction here is a few statements with nothing
// slow between them, so this is far above what a live replica needs, and
// below the default Session lease (10 s) so that a takeover stays within
// two lease periods. A DSN that sets the parameter itself (as a runtime
// parameter or in options) keeps its own value.
const IdleTransactionTimeout = 5 * time.Second

// boundIdleTransactions sets idle_in_transaction_session_timeout in
// params unless the DSN set it.
func boundIdleTransactions(params map[string]string) {
	const name = "idle_in_transaction_session_timeout"
	if _, ok := params[name]; ok || strings.Contains(params["options"], name) {
		return
	}
	params[name] = strconv.FormatInt(IdleTransactionTimeout.Milliseconds(), 10)
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping postgres store: %w", err)
	}
	return nil
}

// Close closes every connection, waiting for those in use to be released;
// later calls do nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(s.pool.Close)
	return nil
}

// missOrConflict explains why a write conditional on version changed no
// row of key: ErrNotFound when exists (a query selecting whether a row of
// key exists) answers false, ErrConflict otherwise.
func (st *Store) missOrConflict(ctx context.Context, op, exists, key string, version int64) error {
	var found bool
	if err := st.pool.QueryRow(ctx, exists, key).Scan(&found); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !found {
		return fmt.Errorf("%s %s: %w", op, key, store.ErrNotFound)
	}
	return fmt.Errorf("%s %s version %d: %w", op, key, version, store.ErrConflict)
}
