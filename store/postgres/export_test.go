package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/astrabox/astrabox/store/migrate"
)

// MigrateTo applies the embedded migrations up to version to the database
// at dsn, as a binary of that schema would have: the upgrade tests start
// from it.
func MigrateTo(ctx context.Context, dsn string, version int) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return err
	}
	var upTo []migrate.Migration
	for _, m := range ms {
		if m.Version <= version {
			upTo = append(upTo, m)
		}
	}
	if len(upTo) == 0 {
		return fmt.Errorf("no migration up to version %d", version)
	}
	return applyMigrations(ctx, pool, upTo)
}

// Begin opens a transaction on one of the Store's own connections, with
// the settings Open gave them: a test leaves it idle, as a frozen replica
// would.
func (s *Store) Begin(ctx context.Context) (pgx.Tx, error) { return s.pool.Begin(ctx) }
