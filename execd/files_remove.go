package execd

import (
	"errors"
	"net/http"
	"os"

	"github.com/astrabox/astrabox/sandbox"
)

// handleRemoveFiles deletes the files named by every `path`. Symbolic links
// are removed themselves. A path that does not exist is already gone and
// is not an error (as in OpenSandbox). A directory is refused with 400
// before anything is deleted: directories go through DELETE /directories.
func (s *Server) handleRemoveFiles(w http.ResponseWriter, r *http.Request) {
	_, paths, err := s.queryPaths(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			writeError(w, fileError("remove", p, err))
			return
		}
		if fi.IsDir() {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidPath, "%s is a directory; DELETE /files removes files only, use DELETE /directories", p))
			return
		}
	}
	for _, p := range paths {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			writeError(w, fileError("remove", p, err))
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// handleRemoveDirs deletes every `path` with everything under it, like
// rm -rf: a missing path is not an error, a symbolic link is removed
// itself, and a file is removed too. Removing "/" is refused.
func (s *Server) handleRemoveDirs(w http.ResponseWriter, r *http.Request) {
	_, paths, err := s.queryPaths(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	for _, p := range paths {
		if p == "/" {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidPath, "refusing to remove /"))
			return
		}
	}
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			writeError(w, fileError("remove", p, err))
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}
