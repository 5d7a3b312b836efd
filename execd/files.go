package execd

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/astrabox/astrabox/sandbox"
)

// registerFiles adds the /files and /directories routes of the OpenSandbox
// execd API.
//
// Every path parameter is absolute, or relative to Config.WorkDir (to
// execd's working directory when that is empty), and is cleaned; "~" and
// environment variables are not expanded. A path with a NUL byte is refused
// with INVALID_PATH (400), a missing file is FILE_NOT_FOUND (404). A request
// naming several paths is validated as a whole first, then carried out path
// by path in a stable (sorted) order; it stops at the first failure, so the
// paths before it stay done.
func (s *Server) registerFiles() {
	s.mux.HandleFunc("GET /files/info", s.handleFileInfo)
	s.mux.HandleFunc("DELETE /files", s.handleRemoveFiles)
	s.mux.HandleFunc("POST /files/permissions", s.handleChmod)
	s.mux.HandleFunc("POST /files/mv", s.handleMove)
	s.mux.HandleFunc("GET /files/search", s.handleSearch)
	s.mux.HandleFunc("POST /files/replace", s.handleReplace)
	s.mux.HandleFunc("POST /files/upload", s.handleUpload)
	s.mux.HandleFunc("GET /files/download", s.handleDownload)
	s.mux.HandleFunc("GET /directories/list", s.handleListDir)
	s.mux.HandleFunc("POST /directories", s.handleMakeDirs)
	s.mux.HandleFunc("DELETE /directories", s.handleRemoveDirs)
}

// resolvePath returns p as a clean absolute path: p itself when absolute,
// otherwise p joined to base (itself taken from "/" when not absolute). An
// empty p and one with a NUL byte are refused with CodeInvalidPath. It
// touches no file.
func resolvePath(base, p string) (string, error) {
	switch {
	case p == "":
		return "", sandbox.Errorf(sandbox.CodeInvalidPath, "path is empty")
	case strings.IndexByte(p, 0) >= 0:
		return "", sandbox.Errorf(sandbox.CodeInvalidPath, "path %q contains a NUL byte", p)
	case filepath.IsAbs(p):
		return filepath.Clean(p), nil
	}
	if strings.IndexByte(base, 0) >= 0 {
		return "", sandbox.Errorf(sandbox.CodeInvalidPath, "working directory contains a NUL byte")
	}
	if !filepath.IsAbs(base) {
		base = string(filepath.Separator) + base
	}
	return filepath.Join(base, p), nil
}

// fileBase is the directory relative paths are resolved against:
// Config.WorkDir made absolute, or execd's working directory.
func (s *Server) fileBase() string {
	if filepath.IsAbs(s.cfg.WorkDir) {
		return filepath.Clean(s.cfg.WorkDir)
	}
	if abs, err := filepath.Abs(s.cfg.WorkDir); err == nil {
		return abs
	}
	return string(filepath.Separator)
}

// resolve is resolvePath against the server's base directory.
func (s *Server) resolve(p string) (string, error) {
	return resolvePath(s.fileBase(), p)
}

// queryPath returns query parameter name resolved as a path; its absence is
// CodeMissingQuery.
func (s *Server) queryPath(r *http.Request, name string) (string, error) {
	q := r.URL.Query()
	if !q.Has(name) {
		return "", sandbox.Errorf(sandbox.CodeMissingQuery, "query parameter %s is required", name)
	}
	return s.resolve(q.Get(name))
}

// queryPaths returns every value of query parameter name, each as given
// and resolved; at least one is required (CodeMissingQuery).
func (s *Server) queryPaths(r *http.Request, name string) (given, resolved []string, err error) {
	given = r.URL.Query()[name]
	if len(given) == 0 {
		return nil, nil, sandbox.Errorf(sandbox.CodeMissingQuery, "query parameter %s is required (repeat it for several paths)", name)
	}
	resolved = make([]string, len(given))
	for i, p := range given {
		if resolved[i], err = s.resolve(p); err != nil {
			return nil, nil, err
		}
	}
	return given, resolved, nil
}

// fileError converts an error of a file operation into a coded error whose
// message reads "<op> <path>: <reason>". Missing files are
// CodeFileNotFound; errors the caller can fix (not a directory, read-only,
// name too long, ...) are CodeInvalidPath.
func fileError(op, path string, err error) error {
	var se *sandbox.Error
	if errors.As(err, &se) {
		return err
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOTDIR, syscall.EISDIR, syscall.ENAMETOOLONG, syscall.ELOOP, syscall.EROFS,
			syscall.EINVAL, syscall.ETXTBSY, syscall.EBUSY, syscall.EPERM:
			return &sandbox.Error{Code: sandbox.CodeInvalidPath, Message: fmt.Sprintf("%s %s: %s", op, path, errno.Error()), Err: err}
		case syscall.ENOTEMPTY:
			return &sandbox.Error{Code: sandbox.CodeAlreadyExists, Message: fmt.Sprintf("%s %s: directory not empty", op, path), Err: err}
		}
	}
	return fsError(op, path, err)
}

// syncDir makes a new or renamed entry of dir durable; filesystems that
// cannot sync a directory are ignored.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
