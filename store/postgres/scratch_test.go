package postgres

import "testing"

func TestWithDatabase(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:p@127.0.0.1:5432/postgres?sslmode=disable": "postgres://u:p@127.0.0.1:5432/scratch?sslmode=disable",
		"host=/run/postgresql dbname=postgres":                   "host=/run/postgresql dbname=postgres dbname=scratch",
	} {
		if got := withDatabase(in, "scratch"); got != want {
			t.Errorf("withDatabase(%q) = %q, want %q", in, got, want)
		}
	}
}
