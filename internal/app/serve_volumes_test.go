package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVolumesConfig(t *testing.T) {
	root := t.TempDir()
	root, _ = filepath.EvalSymlinks(root)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(root, link); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, json, want string // want: "" or a piece of the error
	}{
		{"none", `{}`, ""},
		{"roots and dir", `{"volumes":{"hostPathRoots":["` + root + `"],"dir":"/var/lib/x/volumes"}}`, ""},
		{"unknown key", `{"volumes":{"hostPaths":["/srv"]}}`, "unknown field"},
		{"relative root", `{"volumes":{"hostPathRoots":["srv"]}}`, "volumes.hostPathRoots"},
		{"slash root", `{"volumes":{"hostPathRoots":["/"]}}`, "every host path"},
		{"unclean root", `{"volumes":{"hostPathRoots":["` + root + `/"]}}`, "clean"},
		{"missing root", `{"volumes":{"hostPathRoots":["` + root + `/nope"]}}`, "volumes.hostPathRoots"},
		{"root through a link", `{"volumes":{"hostPathRoots":["` + link + `"]}}`, "symbolic link"},
		{"relative dir", `{"volumes":{"dir":"volumes"}}`, "volumes.dir"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(c.json), &cfg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("want an error with %q, got %v", c.want, err)
			}
		})
	}
}
