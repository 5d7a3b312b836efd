package execd

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// handleReplace replaces every occurrence of `old` with `new` in each file
// (strings.ReplaceAll semantics, on bytes), streaming, so files of any
// size work. A file with no occurrence is left untouched; otherwise the
// result is written beside it and renamed over it, keeping its mode and
// owner. Symbolic links are followed and stay links. `old` must not be
// empty (400). With verbose=true the answer maps each path as given to
// {replacedCount}; otherwise the body is empty.
func (s *Server) handleReplace(w http.ResponseWriter, r *http.Request) {
	verbose, err := queryBool(r, "verbose")
	if err != nil {
		writeError(w, err)
		return
	}
	var req map[string]wire.ReplaceItem
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if len(req) == 0 {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "request body must map at least one path to {old, new}"))
		return
	}
	keys := make([]string, 0, len(req))
	paths := make(map[string]string, len(req))
	for key, it := range req {
		if it.Old == "" {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "replace in %s: old must not be empty", key))
			return
		}
		p, err := s.resolve(key)
		if err != nil {
			writeError(w, err)
			return
		}
		keys = append(keys, key)
		paths[key] = p
	}
	slices.Sort(keys)
	results := make(map[string]wire.ReplaceResult, len(keys))
	for _, key := range keys {
		n, err := replaceInFile(paths[key], []byte(req[key].Old), []byte(req[key].New))
		if err != nil {
			writeError(w, err)
			return
		}
		results[key] = wire.ReplaceResult{ReplacedCount: n}
	}
	if verbose {
		writeJSON(w, http.StatusOK, results)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// replaceInFile replaces old with new in the regular file at p (after
// symbolic links) atomically and returns the number of replacements.
func replaceInFile(p string, old, new []byte) (int, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return 0, fileError("replace in", p, err)
	}
	in, _, err := openRegular(real)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return 0, fileError("stat", real, err)
	}
	dir := filepath.Dir(real)
	tmp, err := os.CreateTemp(dir, ".astrabox-replace-*")
	if err != nil {
		return 0, fileError("create temporary file in", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 64<<10)
	n, err := replaceStream(bw, in, old, new)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return 0, fileError("replace in", real, err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := keepOwner(tmp, fi); err != nil {
		return 0, fileError("keep owner of", real, err)
	}
	if err := tmp.Chmod(fi.Mode() & (os.ModePerm | os.ModeSetuid | os.ModeSetgid | os.ModeSticky)); err != nil {
		return 0, fileError("keep mode of", real, err)
	}
	if err := tmp.Sync(); err != nil {
		return 0, fileError("sync", real, err)
	}
	if err := tmp.Close(); err != nil {
		return 0, fileError("close", real, err)
	}
	if err := os.Rename(tmp.Name(), real); err != nil {
		return 0, fileError("replace", real, err)
	}
	done = true
	syncDir(dir)
	return n, nil
}

// replaceStream copies r to w with every non-overlapping occurrence of old
// (non-empty), leftmost first, replaced by new, and returns how many it
// replaced: strings.ReplaceAll on a stream. It holds at most one read
// buffer plus len(old)-1 bytes.
func replaceStream(w io.Writer, r io.Reader, old, new []byte) (int, error) {
	const chunk = 64 << 10
	buf := make([]byte, 0, chunk+len(old))
	count := 0
	for {
		if cap(buf)-len(buf) < chunk {
			buf = slices.Grow(buf, chunk)
		}
		n, rerr := r.Read(buf[len(buf) : len(buf)+chunk])
		buf = buf[:len(buf)+n]
		pos := 0
		for {
			i := bytes.Index(buf[pos:], old)
			if i < 0 {
				break
			}
			if _, err := w.Write(buf[pos : pos+i]); err != nil {
				return count, err
			}
			if _, err := w.Write(new); err != nil {
				return count, err
			}
			count++
			pos += i + len(old)
		}
		if rerr == io.EOF {
			_, err := w.Write(buf[pos:])
			return count, err
		}
		if rerr != nil {
			return count, rerr
		}
		// The last len(old)-1 bytes may begin an occurrence that the next
		// read completes; keep them.
		if safe := len(buf) - (len(old) - 1); safe > pos {
			if _, err := w.Write(buf[pos:safe]); err != nil {
				return count, err
			}
			pos = safe
		}
		buf = append(buf[:0], buf[pos:]...)
	}
}

// keepOwner gives f the owner and group of fi where they differ.
func keepOwner(f *os.File, fi os.FileInfo) error {
	want, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return nil
	}
	cur, err := f.Stat()
	if err != nil {
		return err
	}
	if got, ok := cur.Sys().(*syscall.Stat_t); ok && got.Uid == want.Uid && got.Gid == want.Gid {
		return nil
	}
	return f.Chown(int(want.Uid), int(want.Gid))
}
