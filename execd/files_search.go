package execd

import (
	"io/fs"
	"net/http"
	"os"
	"path/filepath"

	"github.com/astrabox/astrabox/execd/glob"
	"github.com/astrabox/astrabox/sandbox"
)

// handleSearch walks the directory `path` (a symbolic link as the root is
// followed; none below it is) and answers the FileInfo of every entry that
// is not a directory and whose path relative to the root matches the glob
// `pattern` (default "**"; syntax in package glob: a pattern without '/'
// matches the base name at any depth). Entries come in lexical walk order.
// Unreadable subdirectories are skipped. A missing root is 404, a root that
// is not a directory or a malformed pattern 400.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	root, err := s.queryPath(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	pattern := r.URL.Query().Get("pattern")
	if pattern == "" {
		pattern = "**"
	}
	g, err := glob.Compile(pattern)
	if err != nil {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid search pattern: %v", err))
		return
	}
	fi, err := os.Stat(root)
	if err != nil {
		writeError(w, fileError("search", root, err))
		return
	}
	if !fi.IsDir() {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidPath, "search root %s is not a directory", root))
		return
	}
	walkRoot := root
	if root != string(filepath.Separator) {
		walkRoot += string(filepath.Separator) // follow a symbolic link given as the root
	}
	ctx := r.Context()
	cache := newNameCache()
	arr := startJSONArray(w)
	defer arr.close()
	_ = filepath.WalkDir(walkRoot, func(p string, d fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || d.IsDir() {
			return nil // unreadable directories are skipped
		}
		rel, err := filepath.Rel(root, p)
		if err != nil || !g.Match(filepath.ToSlash(rel)) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil // gone since the directory was read
		}
		return arr.add(cache.info(p, info))
	})
}
