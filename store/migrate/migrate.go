// Package migrate loads the schema migrations of the store drivers. A driver
// embeds its migrations as files named NNNN_what.sql; Load reads and orders
// them, and the driver applies each step in its own way (store/sqlite,
// store/postgres), recording the versions it applied.
//
// A released migration is never edited: a change to the schema is a new
// file with the next version.
package migrate

import (
	"cmp"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema step.
type Migration struct {
	// Version is the file's NNNN, a positive number; steps apply in its
	// order.
	Version int
	// Name is the file's base name, NNNN_what.sql.
	Name string
	// SQL is the file's content: one or more statements.
	SQL string
}

// Load returns the migrations dir/*.sql of fsys ordered by Version. It
// refuses a name that is not NNNN_what.sql with NNNN a positive number, two
// files of one version, and a dir without migrations. Other files in dir
// are ignored.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("load migrations: %w", err)
	}
	ms := make([]Migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		v, err := version(base)
		if err != nil {
			return nil, err
		}
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("load migration %s: %w", base, err)
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(body)})
	}
	slices.SortFunc(ms, func(a, b Migration) int { return cmp.Compare(a.Version, b.Version) })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].Name, ms[i].Name)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	return ms, nil
}

// version returns the NNNN of the file name base, NNNN_what.sql.
func version(base string) (int, error) {
	num, _, ok := strings.Cut(base, "_")
	v, err := strconv.Atoi(num)
	if !ok || err != nil || v <= 0 {
		return 0, fmt.Errorf("migration %s: name is not NNNN_what.sql", base)
	}
	return v, nil
}
