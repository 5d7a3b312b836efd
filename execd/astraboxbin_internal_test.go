package execd

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRunningExecutable(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	self := write("self", 0o755)
	other := write("other", 0o755)
	plain := write("plain", 0o644)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(self, link); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")

	cases := []struct {
		name       string
		self       string
		candidates []string
		want       string
	}{
		{"the first that names self", self, []string{other, link, self}, link},
		{"empty, relative and missing candidates are skipped", self, []string{"", "self", missing, self}, self},
		{"a path is cleaned", self, []string{dir + "//./self"}, self},
		{"none names self", self, []string{other, plain}, ""},
		{"no candidates", self, nil, ""},
		{"without /proc, the first executable file", missing, []string{dir, plain, other}, other},
		{"without /proc, nothing executable", missing, []string{dir, plain}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := runningExecutable(tc.self, tc.candidates...); got != tc.want {
				t.Fatalf("runningExecutable(%q, %q) = %q, want %q", tc.self, tc.candidates, got, tc.want)
			}
		})
	}
}
