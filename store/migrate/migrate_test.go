package migrate_test

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/astrabox/astrabox/store/migrate"
)

// files returns an FS holding each name under migrations/ with a body
// naming the file.
func files(names ...string) fstest.MapFS {
	fsys := fstest.MapFS{}
	for _, n := range names {
		fsys["migrations/"+n] = &fstest.MapFile{Data: []byte("-- " + n)}
	}
	return fsys
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name  string
		fsys  fstest.MapFS
		want  []string // names in order
		vers  []int
		error string // a part of the error; "" for none
	}{
		{"ordered by version, not name", files("0010_ten.sql", "0002_two.sql", "0001_init.sql"),
			[]string{"0001_init.sql", "0002_two.sql", "0010_ten.sql"}, []int{1, 2, 10}, ""},
		{"unpadded numbers", files("2_b.sql", "10_c.sql", "1_a.sql"),
			[]string{"1_a.sql", "2_b.sql", "10_c.sql"}, []int{1, 2, 10}, ""},
		{"other files ignored", fstest.MapFS{
			"migrations/0001_init.sql": {Data: []byte("x")},
			"migrations/README.md":     {Data: []byte("x")},
			"migrations/0002_b.sql.gz": {Data: []byte("x")},
			"0003_outside.sql":         {Data: []byte("x")},
		}, []string{"0001_init.sql"}, []int{1}, ""},
		{"no underscore", files("0001_init.sql", "0002.sql"), nil, nil, "0002.sql: name is not NNNN_what.sql"},
		{"not a number", files("abcd_init.sql"), nil, nil, "name is not NNNN_what.sql"},
		{"zero", files("0000_init.sql"), nil, nil, "name is not NNNN_what.sql"},
		{"negative", files("-1_init.sql"), nil, nil, "name is not NNNN_what.sql"},
		{"duplicate version", files("0001_init.sql", "0002_a.sql", "2_b.sql"), nil, nil, "share a version"},
		{"empty", fstest.MapFS{}, nil, nil, "no migrations"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ms, err := migrate.Load(tc.fsys, "migrations")
			if tc.error != "" {
				if err == nil || !strings.Contains(err.Error(), tc.error) {
					t.Fatalf("error %v, want one containing %q", err, tc.error)
				}
				return
			}
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			var names []string
			var vers []int
			for _, m := range ms {
				names = append(names, m.Name)
				vers = append(vers, m.Version)
				if want := string(tc.fsys["migrations/"+m.Name].Data); m.SQL != want {
					t.Errorf("%s: SQL %q, want %q", m.Name, m.SQL, want)
				}
			}
			if !slices.Equal(names, tc.want) || !slices.Equal(vers, tc.vers) {
				t.Errorf("loaded %v %v, want %v %v", names, vers, tc.want, tc.vers)
			}
		})
	}
}
