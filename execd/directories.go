package execd

import (
	"net/http"
	"os"
	"path/filepath"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// handleListDir lists the directory `path` to `depth` levels (default 1:
// its children). Depth 0 asks for no level at all and answers an empty
// array; the directory itself is never included. Entries are in lexical
// order within each directory, each directory's entries right after it
// (depth first). Symbolic links are reported as type symlink and never
// followed; `path` itself being a symbolic link is refused with 400, as is
// a path that is not a directory. Unreadable subdirectories are listed
// without their contents.
func (s *Server) handleListDir(w http.ResponseWriter, r *http.Request) {
	dir, err := s.queryPath(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	depth, err := queryInt64(r, "depth", 1)
	if err != nil {
		writeError(w, err)
		return
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		writeError(w, fileError("list", dir, err))
		return
	}
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidPath, "%s is a symbolic link; links are not traversed, list the directory it points to", dir))
		return
	case !fi.IsDir():
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidPath, "%s is not a directory", dir))
		return
	}
	var entries []os.DirEntry
	if depth > 0 {
		if entries, err = os.ReadDir(dir); err != nil {
			writeError(w, fileError("list", dir, err))
			return
		}
	}
	l := lister{arr: startJSONArray(w), cache: newNameCache(), depth: depth, r: r}
	defer l.arr.close()
	_ = l.list(dir, entries, 1)
}

// lister writes a depth-first listing.
type lister struct {
	arr   *jsonArray
	cache *nameCache
	depth int64
	r     *http.Request
}

// list writes entries of dir (at level, 1 for the root's children) and,
// below depth, the contents of each subdirectory right after it.
func (l *lister) list(dir string, entries []os.DirEntry, level int64) error {
	for _, e := range entries {
		if err := l.r.Context().Err(); err != nil {
			return err
		}
		p := filepath.Join(dir, e.Name())
		fi, err := e.Info()
		if err != nil {
			continue // gone since the directory was read
		}
		if err := l.arr.add(l.cache.info(p, fi)); err != nil {
			return err
		}
		if !e.IsDir() || level >= l.depth {
			continue
		}
		sub, err := os.ReadDir(p)
		if err != nil {
			continue
		}
		if err := l.list(p, sub, level+1); err != nil {
			return err
		}
	}
	return nil
}

// handleMakeDirs creates each directory with its parents (mkdir -p). Mode
// (octal digits, default 755) applies to the directory named, when it is
// created or when a mode is given explicitly; parents get 755 less the
// umask. Owner and group (names or numeric ids) apply to the directory
// named. A path that exists and is not a directory is 409.
func (s *Server) handleMakeDirs(w http.ResponseWriter, r *http.Request) {
	var req map[string]wire.Permission
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	changes, err := s.preparePerms(req, defaultDirMode)
	if err != nil {
		writeError(w, err)
		return
	}
	for _, c := range changes {
		fi, err := os.Stat(c.path)
		existed := err == nil
		if existed && !fi.IsDir() {
			writeError(w, sandbox.Errorf(sandbox.CodeAlreadyExists, "create directory %s: it exists and is not a directory", c.path))
			return
		}
		if err := os.MkdirAll(c.path, 0o755); err != nil {
			writeError(w, fileError("create directory", c.path, err))
			return
		}
		c.setMode = !existed || req[c.key].Mode != 0
		if err := c.apply(); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
