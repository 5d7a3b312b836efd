package execd

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// handleMove renames files or directories, in the order given, with
// rename(2) semantics: dest is the new path (not a directory to move
// into), an existing file at dest is replaced, an existing directory at
// dest is refused (409). The directory that is to hold dest must exist
// (404 otherwise). Across filesystems the entry is copied (mode, owner
// where permitted, times) and the source removed.
func (s *Server) handleMove(w http.ResponseWriter, r *http.Request) {
	var req []wire.RenameItem
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	type move struct{ src, dst string }
	moves := make([]move, 0, len(req))
	for i, it := range req {
		if it.Src == "" || it.Dest == "" {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "item %d: src and dest are both required", i))
			return
		}
		src, err := s.resolve(it.Src)
		if err != nil {
			writeError(w, err)
			return
		}
		dst, err := s.resolve(it.Dest)
		if err != nil {
			writeError(w, err)
			return
		}
		moves = append(moves, move{src, dst})
	}
	for _, m := range moves {
		if err := moveFile(m.src, m.dst, os.Rename); err != nil {
			writeError(w, err)
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

// moveFile moves src to dst with rename, falling back to copy and remove
// when rename reports EXDEV. Errors are coded.
func moveFile(src, dst string, rename func(string, string) error) error {
	if _, err := os.Lstat(src); err != nil {
		return fileError("move", src, err)
	}
	parent := filepath.Dir(dst)
	fi, err := os.Stat(parent)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return sandbox.Errorf(sandbox.CodeFileNotFound, "move %s to %s: target directory %s does not exist", src, dst, parent)
	case err != nil:
		return fileError("move "+src+" to", dst, err)
	case !fi.IsDir():
		return sandbox.Errorf(sandbox.CodeInvalidPath, "move %s to %s: %s is not a directory", src, dst, parent)
	}
	err = rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		err = copyAcross(src, dst)
		if err == nil {
			if err := os.RemoveAll(src); err != nil {
				return fileError("remove moved source", src, err)
			}
			return nil
		}
	}
	if err != nil {
		return fileError("move "+src+" to", dst, err)
	}
	return nil
}
