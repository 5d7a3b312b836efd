package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/astrabox/astrabox/store/migrate"
)

// migrationFiles holds the schema migrations, named NNNN_what.sql; they are
// applied in the order of NNNN and never edited once released.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockKey is the advisory lock that serializes migrations of one
// database ("astrabox" in ASCII).
const migrateLockKey int64 = 0x617374726162_6f78

// migrateSchema applies every embedded migration that schema_migrations does
// not list.
func migrateSchema(ctx context.Context, pool *pgxpool.Pool) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return applyMigrations(ctx, pool, ms)
}

// applyMigrations applies, in order and in one transaction, every migration
// of ms that schema_migrations does not list. The transaction first takes an
// advisory lock, so processes opening the database at once apply each step
// exactly once; the lock goes with the transaction, however it ends.
// Versions this binary does not know (a newer binary's) are left alone.
func applyMigrations(ctx context.Context, pool *pgxpool.Pool, ms []migrate.Migration) error {
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLockKey); err != nil {
			return fmt.Errorf("lock: %w", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now()
		)`); err != nil {
			return fmt.Errorf("create schema_migrations: %w", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int])
		if err != nil {
			return fmt.Errorf("read schema_migrations: %w", err)
		}
		done := make(map[int]bool, len(applied))
		for _, v := range applied {
			done[v] = true
		}
		for _, m := range ms {
			if done[m.Version] {
				continue
			}
			// No arguments: the simple protocol runs every statement of the file.
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`,
				m.Version, m.Name); err != nil {
				return fmt.Errorf("%s: %w", m.Name, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
