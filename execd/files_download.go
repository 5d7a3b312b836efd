package execd

import (
	"bytes"
	"io"
	"math"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// handleDownload serves one regular file (symbolic links are followed).
//
//   - Without Range: 200, application/octet-stream, Content-Length and
//     Content-Disposition.
//   - Range "bytes=a-b", "bytes=a-" or "bytes=-n" (one range): 206 with
//     Content-Range. A range that cannot be served (start past the end, an
//     empty file, several ranges, another unit, bad syntax) is 416 with a
//     JSON RANGE_NOT_SATISFIABLE body and Content-Range "bytes */size".
//   - `offset` (1-based first line, default 1) and/or `limit` (number of
//     lines, default all): 200 text/plain with those lines verbatim,
//     newlines included. Combined with Range: 400.
//
// A directory or other non-regular file is 400 INVALID_PATH.
func (s *Server) handleDownload(w http.ResponseWriter, r *http.Request) {
	p, err := s.queryPath(r, "path")
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	lineMode := q.Has("offset") || q.Has("limit")
	rangeHeader := r.Header.Get("Range")
	if lineMode && rangeHeader != "" {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "the Range header cannot be combined with offset/limit"))
		return
	}
	first, limit, err := lineWindow(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f, size, err := openRegular(p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()

	if lineMode {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		_ = copyLines(w, f, first, limit)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filepath.Base(p)}))
	h.Set("Accept-Ranges", "bytes")
	if rangeHeader == "" {
		h.Set("Content-Length", strconv.FormatInt(size, 10))
		w.WriteHeader(http.StatusOK)
		_, _ = io.CopyN(w, f, size)
		return
	}
	start, length, err := parseRange(rangeHeader, size)
	if err != nil {
		h.Del("Content-Disposition")
		h.Set("Content-Range", "bytes */"+strconv.FormatInt(size, 10))
		writeError(w, err)
		return
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		writeError(w, fileError("seek", p, err))
		return
	}
	h.Set("Content-Range", "bytes "+strconv.FormatInt(start, 10)+"-"+strconv.FormatInt(start+length-1, 10)+"/"+strconv.FormatInt(size, 10))
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	w.WriteHeader(http.StatusPartialContent)
	_, _ = io.CopyN(w, f, length)
}

// lineWindow reads the offset and limit query parameters: the first line
// (1-based, default 1) and the number of lines (0: all).
func lineWindow(r *http.Request) (first, limit int64, err error) {
	q := r.URL.Query()
	if first, err = queryInt64(r, "offset", 1); err != nil {
		return 0, 0, err
	}
	if q.Has("offset") && first < 1 {
		return 0, 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "offset is a 1-based line number; got %d", first)
	}
	if limit, err = queryInt64(r, "limit", 0); err != nil {
		return 0, 0, err
	}
	if q.Has("limit") && limit < 1 {
		return 0, 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "limit must be at least 1; got %d", limit)
	}
	return first, limit, nil
}

// openRegular opens p for reading if it is a regular file (after following
// symbolic links), and returns its size. It checks before opening, so a
// FIFO never blocks the request.
func openRegular(p string) (*os.File, int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return nil, 0, fileError("open", p, err)
	}
	if err := checkRegular(p, fi); err != nil {
		return nil, 0, err
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, 0, fileError("open", p, err)
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, 0, fileError("stat", p, err)
	}
	if err := checkRegular(p, fi); err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// checkRegular refuses directories and other non-regular files with
// CodeInvalidPath.
func checkRegular(p string, fi os.FileInfo) error {
	switch {
	case fi.IsDir():
		return sandbox.Errorf(sandbox.CodeInvalidPath, "%s is a directory; only regular files can be read (list it with /directories/list)", p)
	case !fi.Mode().IsRegular():
		return sandbox.Errorf(sandbox.CodeInvalidPath, "%s is not a regular file (%s)", p, fileType(fi))
	}
	return nil
}

// parseRange parses a Range header of one byte range against a file of
// size bytes and returns the first byte and the length to send. Every
// error carries CodeRangeNotSatisfiable.
func parseRange(h string, size int64) (start, length int64, err error) {
	unsat := func(format string, args ...any) (int64, int64, error) {
		return 0, 0, sandbox.Errorf(sandbox.CodeRangeNotSatisfiable, format, args...)
	}
	spec, ok := strings.CutPrefix(strings.TrimSpace(h), "bytes=")
	if !ok {
		return unsat("range %q: only byte ranges (bytes=...) are supported", h)
	}
	if strings.Contains(spec, ",") {
		return unsat("range %q: only one range per request is supported", h)
	}
	a, b, ok := strings.Cut(spec, "-")
	a, b = strings.TrimSpace(a), strings.TrimSpace(b)
	if !ok || (a == "" && b == "") {
		return unsat("range %q is malformed; use bytes=a-b, bytes=a- or bytes=-n", h)
	}
	if a == "" {
		n, err := strconv.ParseInt(b, 10, 64)
		if err != nil || n < 0 || b[0] == '+' {
			return unsat("range %q is malformed; use bytes=a-b, bytes=a- or bytes=-n", h)
		}
		if n == 0 || size == 0 {
			return unsat("range %q selects no byte of the %d-byte file", h, size)
		}
		n = min(n, size)
		return size - n, n, nil
	}
	start, err = strconv.ParseInt(a, 10, 64)
	if err != nil || start < 0 || a[0] == '+' {
		return unsat("range %q is malformed; use bytes=a-b, bytes=a- or bytes=-n", h)
	}
	end := int64(math.MaxInt64)
	if b != "" {
		end, err = strconv.ParseInt(b, 10, 64)
		if err != nil || end < start || b[0] == '+' {
			return unsat("range %q is malformed; use bytes=a-b, bytes=a- or bytes=-n", h)
		}
	}
	if start >= size {
		return unsat("range %q starts at or after the end of the %d-byte file", h, size)
	}
	end = min(end, size-1)
	return start, end - start + 1, nil
}

// copyLines copies lines first..first+limit-1 (1-based; limit 0: to the
// end) of r to w verbatim, newlines included, streaming: memory does not
// grow with line length.
func copyLines(w io.Writer, r io.Reader, first, limit int64) error {
	last := int64(math.MaxInt64)
	if limit > 0 && first <= math.MaxInt64-limit {
		last = first + limit - 1
	}
	buf := make([]byte, 64<<10)
	line := int64(1)
	for {
		n, rerr := r.Read(buf)
		chunk := buf[:n]
		for len(chunk) > 0 {
			seg := chunk
			i := bytes.IndexByte(chunk, '\n')
			if i >= 0 {
				seg = chunk[:i+1]
			}
			if line >= first {
				if _, err := w.Write(seg); err != nil {
					return err
				}
			}
			chunk = chunk[len(seg):]
			if i >= 0 {
				if line == last {
					return nil
				}
				line++
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}
