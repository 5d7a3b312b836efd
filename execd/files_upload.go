package execd

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Form field names of an upload, as the OpenSandbox SDKs send them.
const (
	uploadMetadataField = "metadata"
	uploadFileField     = "file"
)

// uploadTarget is a validated FileMetadata.
type uploadTarget struct {
	path     string
	mode     os.FileMode
	uid, gid int
	size     *int64
	sum      []byte // expected SHA-256, or nil
}

// handleUpload receives files from a multipart/form-data body streamed part
// by part (nothing is buffered beyond one read). Each file part named
// "file" takes the oldest metadata part named "metadata" not yet used, so
// both metadata,file,metadata,file and metadata,metadata,file,file work.
//
// Each file is written to a temporary file beside its target (parent
// directories are created), counted and hashed as it arrives, checked
// against Config.MaxUploadBytes (413 PAYLOAD_TOO_LARGE), the metadata size
// and sha256 (422 UPLOAD_VERIFICATION_FAILED), given its owner, group and
// mode (default 644), synced, and only then renamed into place. On any
// failure the temporary file is removed and the target is untouched; files
// completed earlier in the same request stay.
func (s *Server) handleUpload(w http.ResponseWriter, r *http.Request) {
	if ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";"); strings.TrimSpace(ct) == "application/octet-stream" {
		s.handleRawUpload(w, r)
		return
	}
	mr, err := r.MultipartReader()
	if err != nil {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "upload body must be multipart/form-data: %v", err))
		return
	}
	var pending []uploadTarget
	files := 0
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "malformed multipart body: %v", err))
			return
		}
		switch name := part.FormName(); name {
		case uploadMetadataField:
			t, err := s.readUploadMetadata(part)
			if err != nil {
				writeError(w, err)
				return
			}
			pending = append(pending, t)
		case uploadFileField:
			if len(pending) == 0 {
				writeError(w, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "file part %d has no metadata part before it", files+1))
				return
			}
			t := pending[0]
			pending = pending[1:]
			if err := s.receiveFile(part, t); err != nil {
				writeError(w, err)
				return
			}
			files++
		default:
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "unexpected form field %q; an upload has %q and %q parts", name, uploadMetadataField, uploadFileField))
			return
		}
		_ = part.Close()
	}
	if len(pending) > 0 {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "metadata for %s has no file part after it", pending[0].path))
		return
	}
	if files == 0 {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "upload has no %q part", uploadFileField))
		return
	}
	w.WriteHeader(http.StatusOK)
}

// readUploadMetadata reads and validates one metadata part.
func (s *Server) readUploadMetadata(part *multipart.Part) (uploadTarget, error) {
	b, err := io.ReadAll(io.LimitReader(part, s.cfg.MaxJSONBytes+1))
	if err != nil {
		return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "read metadata part: %v", err)
	}
	if int64(len(b)) > s.cfg.MaxJSONBytes {
		return uploadTarget{}, sandbox.Errorf(sandbox.CodePayloadTooLarge, "metadata part exceeds %d bytes", s.cfg.MaxJSONBytes)
	}
	var meta wire.FileMetadata
	if err := json.Unmarshal(b, &meta); err != nil {
		return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "metadata is not a valid JSON object: %v", err)
	}
	return s.prepareUpload(meta)
}

// prepareUpload validates meta before any byte of its file is read.
func (s *Server) prepareUpload(meta wire.FileMetadata) (uploadTarget, error) {
	if meta.Path == "" {
		return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "metadata has no path")
	}
	p, err := s.resolve(meta.Path)
	if err != nil {
		return uploadTarget{}, err
	}
	t := uploadTarget{path: p, size: meta.Size}
	m := meta.Mode
	if m == 0 {
		m = defaultFileMode
	}
	if t.mode, err = parseMode(m, sandbox.CodeInvalidFileMetadata); err != nil {
		return uploadTarget{}, err
	}
	if t.uid, t.gid, err = lookupIDs(meta.Owner, meta.Group, sandbox.CodeInvalidFileMetadata); err != nil {
		return uploadTarget{}, err
	}
	if t.size != nil {
		if *t.size < 0 {
			return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "metadata size %d is negative", *t.size)
		}
		if limit := s.cfg.MaxUploadBytes; limit > 0 && *t.size > limit {
			return uploadTarget{}, sandbox.Errorf(sandbox.CodePayloadTooLarge, "file %s of %d bytes exceeds the upload limit of %d bytes", p, *t.size, limit)
		}
	}
	if meta.SHA256 != "" {
		sum, err := hex.DecodeString(meta.SHA256)
		if err != nil || len(sum) != sha256.Size {
			return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "metadata sha256 must be 64 hex digits, got %q", meta.SHA256)
		}
		t.sum = sum
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return uploadTarget{}, sandbox.Errorf(sandbox.CodeInvalidPath, "upload target %s is a directory", p)
	}
	return t, nil
}

// handleRawUpload (addition) receives one file as the raw request body
// (Content-Type: application/octet-stream), its metadata in the query:
// path, and optionally mode, owner, group, size and sha256. It is the fast
// path of the Go client: no multipart framing to parse. Verification and
// placement are those of handleUpload.
func (s *Server) handleRawUpload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	meta := wire.FileMetadata{Path: q.Get("path"), Owner: q.Get("owner"), Group: q.Get("group"), SHA256: q.Get("sha256")}
	if v := q.Get("mode"); v != "" {
		m, err := strconv.Atoi(v)
		if err != nil {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "mode must be octal digits, got %q", v))
			return
		}
		meta.Mode = m
	}
	if v := q.Get("size"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, sandbox.Errorf(sandbox.CodeInvalidFileMetadata, "size must be a non-negative integer, got %q", v))
			return
		}
		meta.Size = &n
	}
	t, err := s.prepareUpload(meta)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.receiveFile(r.Body, t); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func hashSum(h hash.Hash) []byte {
	if h == nil {
		return nil
	}
	return h.Sum(nil)
}

// receiveFile streams one file part into place as handleUpload describes.
func (s *Server) receiveFile(part io.Reader, t uploadTarget) (err error) {
	dir := filepath.Dir(t.path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fileError("create directory", dir, err)
	}
	tmp, err := os.CreateTemp(dir, ".astrabox-upload-*")
	if err != nil {
		return fileError("create temporary file in", dir, err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()

	src := &readRecorder{r: part}
	var rd io.Reader = src
	limit := s.cfg.MaxUploadBytes
	if limit > 0 {
		rd = io.LimitReader(rd, limit+1)
	}
	if t.size != nil {
		rd = io.LimitReader(rd, *t.size+1) // one byte over is enough to tell
	}
	// Hash only when a hash is to be verified: SHA-256 would otherwise
	// bound the upload rate.
	bw := bufio.NewWriterSize(tmp, 256<<10)
	var dst io.Writer = bw
	var h hash.Hash
	if t.sum != nil {
		h = sha256.New()
		dst = io.MultiWriter(bw, h)
	}
	n, err := io.CopyBuffer(dst, rd, make([]byte, 256<<10))
	if err == nil {
		err = bw.Flush()
	}
	switch {
	case err != nil && src.err != nil:
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "read file part for %s: %v", t.path, src.err)
	case err != nil:
		return fileError("write", t.path, err)
	case limit > 0 && n > limit:
		return sandbox.Errorf(sandbox.CodePayloadTooLarge, "file %s exceeds the upload limit of %d bytes", t.path, limit)
	case t.size != nil && n > *t.size:
		return sandbox.Errorf(sandbox.CodeUploadVerification, "file %s: received more than the %d bytes the metadata announced", t.path, *t.size)
	case t.size != nil && n != *t.size:
		return sandbox.Errorf(sandbox.CodeUploadVerification, "file %s: received %d bytes, the metadata announced %d", t.path, n, *t.size)
	}
	fi, err := tmp.Stat()
	if err != nil {
		return fileError("stat", tmp.Name(), err)
	}
	if fi.Size() != n {
		return sandbox.Errorf(sandbox.CodeUploadVerification, "file %s: wrote %d bytes of the %d received", t.path, fi.Size(), n)
	}
	if sum := hashSum(h); t.sum != nil && !bytes.Equal(sum, t.sum) {
		return sandbox.Errorf(sandbox.CodeUploadVerification, "file %s: sha256 is %x, the metadata announced %x", t.path, sum, t.sum)
	}
	if t.uid >= 0 || t.gid >= 0 {
		if err := tmp.Chown(t.uid, t.gid); err != nil {
			return fileError("chown", t.path, err)
		}
	}
	if err := tmp.Chmod(t.mode); err != nil {
		return fileError("chmod", t.path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fileError("sync", t.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fileError("close", t.path, err)
	}
	if err := os.Rename(tmp.Name(), t.path); err != nil {
		return fileError("rename upload to", t.path, err)
	}
	done = true
	syncDir(dir)
	return nil
}

// readRecorder remembers the error of its reader, so that a failed copy can
// be blamed on the client or on the disk.
type readRecorder struct {
	r   io.Reader
	err error
}

func (rr *readRecorder) Read(p []byte) (int, error) {
	n, err := rr.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		rr.err = err
	}
	return n, err
}
