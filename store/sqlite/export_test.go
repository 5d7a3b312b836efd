package sqlite

import (
	"context"
	"fmt"

	"github.com/astrabox/astrabox/store/migrate"
)

// MigrateTo applies the embedded migrations up to version to the file at
// path, as a binary of that schema would have: the upgrade tests start
// from it.
func MigrateTo(ctx context.Context, path string, version int) error {
	db, err := openDB(path, nil)
	if err != nil {
		return err
	}
	defer db.Close()
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
	return applyMigrations(ctx, db, upTo)
}
