package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/store/migrate"
)

// migrationFiles holds the schema migrations, named NNNN_what.sql; they are
// applied in the order of NNNN and never edited once released.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateSchema applies, in order, every embedded migration that
// schema_migrations does not list.
func migrateSchema(ctx context.Context, db *sql.DB) error {
	ms, err := migrate.Load(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return applyMigrations(ctx, db, ms)
}

// applyMigrations applies, in order, every migration of ms that
// schema_migrations does not list, each in its own transaction together with
// its schema_migrations row. The transactions begin IMMEDIATE on db, so two
// processes opening the same file at once apply each step exactly once.
// Versions this binary does not know (a newer binary's) are left alone.
func applyMigrations(ctx context.Context, db *sql.DB, ms []migrate.Migration) error {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, db, m); err != nil {
			return fmt.Errorf("migrate %s: %w", m.Name, err)
		}
	}
	return nil
}

// applyMigration applies m unless it is already recorded.
func applyMigration(ctx context.Context, db *sql.DB, m migrate.Migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx,
		`SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.Version, m.Name, time.Now().UnixMicro()); err != nil {
		return err
	}
	return tx.Commit()
}
