package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/textproto"
	"net/url"
	"path"
	"strconv"
	"sync"

	"github.com/astrabox/astrabox/execd/wire"
)

// UploadOptions describes an uploaded file beyond its bytes.
type UploadOptions struct {
	// Mode is the file mode as octal digits in a decimal number (644, 755);
	// 0 means execd's default, 644.
	Mode int
	// Owner and Group are names or numeric ids; "" keeps execd's user.
	Owner, Group string
	// Size, when set, is the exact number of bytes the reader yields;
	// execd refuses the upload otherwise.
	Size *int64
	// SHA256, when set, is the hex SHA-256 of the bytes; execd refuses the
	// upload (UPLOAD_VERIFICATION_FAILED) if what it wrote differs.
	SHA256 string
}

// Upload streams r into a new file at path: the raw body of one request
// (AstraBox's fast path; UploadMultipart sends the OpenSandbox form). The
// file appears only once complete and verified (size, and SHA-256 when
// given). r is read until EOF or until the request fails, and never after
// Upload returns (so a Read that blocks delays the return). Errors from
// execd are *APIError: PAYLOAD_TOO_LARGE, UPLOAD_VERIFICATION_FAILED,
// INVALID_PATH, INVALID_FILE_METADATA.
func (c *Client) Upload(ctx context.Context, path string, r io.Reader, opts UploadOptions) error {
	q := url.Values{"path": {path}}
	if opts.Mode != 0 {
		q.Set("mode", strconv.Itoa(opts.Mode))
	}
	if opts.Owner != "" {
		q.Set("owner", opts.Owner)
	}
	if opts.Group != "" {
		q.Set("group", opts.Group)
	}
	if opts.Size != nil {
		q.Set("size", strconv.FormatInt(*opts.Size, 10))
	}
	if opts.SHA256 != "" {
		q.Set("sha256", opts.SHA256)
	}
	body := &guardedReader{r: r}
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/files/upload", query: q, body: body,
		contentType: "application/octet-stream", contentLength: opts.Size})
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		err = resp.Body.Close()
	}
	body.close()
	return err
}

// guardedReader stops reading its source once closed; close waits for a
// read in progress, so the source is never read after close returns.
type guardedReader struct {
	mu     sync.Mutex
	r      io.Reader
	closed bool
}

func (g *guardedReader) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return 0, errUploadEnded
	}
	return g.r.Read(p)
}

func (g *guardedReader) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// UploadMultipart streams r to the file at path in the box (absolute, or relative to
// execd's working directory), creating parent directories. Nothing is
// buffered beyond one copy buffer: the multipart body is produced by a
// goroutine through a pipe while the request is sent. The file appears
// only once complete and verified. r is read until EOF or until the
// request fails, and never after Upload returns (so a Read that blocks
// delays the return). Errors from execd are *APIError: PAYLOAD_TOO_LARGE,
// UPLOAD_VERIFICATION_FAILED, INVALID_PATH, INVALID_FILE_METADATA.
func (c *Client) UploadMultipart(ctx context.Context, path string, r io.Reader, opts UploadOptions) error {
	meta, err := json.Marshal(wire.FileMetadata{Path: path, Owner: opts.Owner, Group: opts.Group,
		Mode: opts.Mode, Size: opts.Size, SHA256: opts.SHA256})
	if err != nil {
		return fmt.Errorf("encode upload metadata: %w", err)
	}
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	done := make(chan struct{})
	go func() {
		defer close(done)
		pw.CloseWithError(writeUploadBody(mw, meta, path, r))
	}()
	resp, err := c.do(ctx, request{method: http.MethodPost, path: "/files/upload", body: pr,
		contentType: mw.FormDataContentType()})
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		err = resp.Body.Close()
	}
	// Stop the writer if the request ended before the body was sent, and
	// wait for it, so that r is not read after Upload returns.
	pr.CloseWithError(errUploadEnded)
	<-done
	return err
}

var errUploadEnded = errors.New("upload request ended")

// writeUploadBody writes the metadata part and the file part, as the
// OpenSandbox SDKs do.
func writeUploadBody(mw *multipart.Writer, meta []byte, name string, r io.Reader) error {
	h := make(textproto.MIMEHeader)
	h.Set("Content-Disposition", `form-data; name="metadata"; filename="metadata"`)
	h.Set("Content-Type", "application/json")
	part, err := mw.CreatePart(h)
	if err != nil {
		return err
	}
	if _, err := part.Write(meta); err != nil {
		return err
	}
	part, err = mw.CreateFormFile("file", path.Base(name))
	if err != nil {
		return err
	}
	if _, err := io.Copy(part, r); err != nil {
		return fmt.Errorf("read upload source: %w", err)
	}
	return mw.Close()
}

// WriteFile uploads data to path with mode (octal digits, 0: 644), with
// its size and SHA-256 verified by execd.
func (c *Client) WriteFile(ctx context.Context, path string, data []byte, mode int) error {
	size := int64(len(data))
	sum := sha256.Sum256(data)
	return c.Upload(ctx, path, bytes.NewReader(data), UploadOptions{Mode: mode, Size: &size, SHA256: hex.EncodeToString(sum[:])})
}

// Download streams the file at path from byte offset: length bytes, or to
// the end when length <= 0. A negative offset asks for the last -offset
// bytes (a suffix range) and ignores length. The caller closes the body;
// ctx bounds reading it too. A range past the end of the file is an
// *APIError with code RANGE_NOT_SATISFIABLE.
func (c *Client) Download(ctx context.Context, path string, offset, length int64) (io.ReadCloser, error) {
	req := request{method: http.MethodGet, path: "/files/download", query: url.Values{"path": {path}}}
	switch {
	case offset < 0:
		req.header = http.Header{"Range": {"bytes=" + strconv.FormatInt(offset, 10)}}
	case length > 0:
		req.header = http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", offset, offset+length-1)}}
	case offset > 0:
		req.header = http.Header{"Range": {fmt.Sprintf("bytes=%d-", offset)}}
	}
	resp, err := c.do(ctx, req)
	if err != nil {
		return nil, err
	}
	if req.header != nil && resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		return nil, fmt.Errorf("download %s: execd ignored the byte range (HTTP %d)", path, resp.StatusCode)
	}
	return resp.Body, nil
}

// DownloadLines streams lines first..first+limit-1 (1-based; limit <= 0:
// to the end) of the file at path, newlines included. The caller closes
// the body.
func (c *Client) DownloadLines(ctx context.Context, path string, first, limit int64) (io.ReadCloser, error) {
	q := url.Values{"path": {path}, "offset": {strconv.FormatInt(max(first, 1), 10)}}
	if limit > 0 {
		q.Set("limit", strconv.FormatInt(limit, 10))
	}
	resp, err := c.do(ctx, request{method: http.MethodGet, path: "/files/download", query: q})
	if err != nil {
		return nil, err
	}
	return resp.Body, nil
}

// ReadFile returns the whole file at path.
func (c *Client) ReadFile(ctx context.Context, path string) ([]byte, error) {
	body, err := c.Download(ctx, path, 0, 0)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// Info describes each path (symbolic links themselves, not their
// targets), keyed by the path as given. Any missing path fails the call
// with FILE_NOT_FOUND.
func (c *Client) Info(ctx context.Context, paths ...string) (map[string]wire.FileInfo, error) {
	var out map[string]wire.FileInfo
	err := c.doJSON(ctx, http.MethodGet, "/files/info", url.Values{"path": paths}, nil, &out)
	return out, err
}

// Search returns the files (every entry but directories) under root whose
// path relative to root matches the glob pattern ("" means "**"; a pattern
// without '/' matches base names at any depth). Symbolic links below root
// are not followed.
func (c *Client) Search(ctx context.Context, root, pattern string) ([]wire.FileInfo, error) {
	q := url.Values{"path": {root}}
	if pattern != "" {
		q.Set("pattern", pattern)
	}
	var out []wire.FileInfo
	err := c.doJSON(ctx, http.MethodGet, "/files/search", q, nil, &out)
	return out, err
}

// Replace replaces every occurrence of Old with New in each file and
// returns the number of replacements per path as given.
func (c *Client) Replace(ctx context.Context, items map[string]wire.ReplaceItem) (map[string]wire.ReplaceResult, error) {
	var out map[string]wire.ReplaceResult
	err := c.doJSON(ctx, http.MethodPost, "/files/replace", url.Values{"verbose": {"true"}}, items, &out)
	return out, err
}

// Move renames each Src to Dest, in order (rename semantics; the directory
// of Dest must exist).
func (c *Client) Move(ctx context.Context, items ...wire.RenameItem) error {
	return c.doJSON(ctx, http.MethodPost, "/files/mv", nil, items, nil)
}

// RemoveFiles deletes files (not directories); missing paths are ignored.
func (c *Client) RemoveFiles(ctx context.Context, paths ...string) error {
	return c.doJSON(ctx, http.MethodDelete, "/files", url.Values{"path": paths}, nil, nil)
}

// Chmod changes mode (octal digits; 0 leaves it), owner and group (names
// or numeric ids; "" leaves them) of existing files.
func (c *Client) Chmod(ctx context.Context, perms map[string]wire.Permission) error {
	return c.doJSON(ctx, http.MethodPost, "/files/permissions", nil, perms, nil)
}

// MakeDirs creates each directory with its parents (mkdir -p) and applies
// its permission (mode 0: 755).
func (c *Client) MakeDirs(ctx context.Context, dirs map[string]wire.Permission) error {
	return c.doJSON(ctx, http.MethodPost, "/directories", nil, dirs, nil)
}

// ListDir lists dir to depth levels (1: its children; 0: nothing),
// depth first, lexically within each directory, without following
// symbolic links.
func (c *Client) ListDir(ctx context.Context, dir string, depth int) ([]wire.FileInfo, error) {
	var out []wire.FileInfo
	q := url.Values{"path": {dir}, "depth": {strconv.Itoa(depth)}}
	err := c.doJSON(ctx, http.MethodGet, "/directories/list", q, nil, &out)
	return out, err
}

// RemoveDirs deletes each path and everything under it (rm -rf).
func (c *Client) RemoveDirs(ctx context.Context, paths ...string) error {
	return c.doJSON(ctx, http.MethodDelete, "/directories", url.Values{"path": paths}, nil, nil)
}
