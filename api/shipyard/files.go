package shipyard

import (
	"io"
	"mime"
	"net/http"
	"os"
	"path"
	"strconv"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
)

// Files. Every path is resolved by resolvePath (relative to /workspace,
// "workspace/x" and "/workspace/x" alike, no escape). The routes wait
// ReadyWait for a starting box, then answer session_not_ready.

// fileOp resolves the path query parameter (or p when given) and returns
// a ready box's execd with it.
func (h *Handler) fileOp(w http.ResponseWriter, r *http.Request, p string, required bool) (*execdclient.Client, string, bool) {
	if p == "" && required {
		h.writeError(w, r, validation("path is required"))
		return nil, "", false
	}
	abs, err := resolvePath(p)
	if err != nil {
		h.writeError(w, r, err)
		return nil, "", false
	}
	_, c, err := h.ready(r.Context(), r.PathValue("id"), h.cfg.ReadyWait, false)
	if err != nil {
		h.writeError(w, r, err)
		return nil, "", false
	}
	return c, abs, true
}

// readFile answers {content}: the file as text (invalid UTF-8 replaced),
// up to MaxFileBytes; download serves any size and bytes exactly.
func (h *Handler) readFile(w http.ResponseWriter, r *http.Request) {
	c, abs, ok := h.fileOp(w, r, r.URL.Query().Get("path"), true)
	if !ok {
		return
	}
	info, err := c.Info(r.Context(), abs)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if fi := info[abs]; fi.Type == "directory" {
		h.writeError(w, r, validation("path "+quote(relPath(abs))+" is a directory"))
		return
	} else if fi.Size > h.cfg.MaxFileBytes {
		h.writeError(w, r, newError(http.StatusRequestEntityTooLarge, codePayloadTooLarge,
			"file is larger than "+strconv.FormatInt(h.cfg.MaxFileBytes, 10)+" bytes; use filesystem/download"))
		return
	}
	b, err := c.ReadFile(r.Context(), abs)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"content": string(b)})
}

// writeFile writes {path, content}, creating parent directories.
func (h *Handler) writeFile(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
	}
	if _, err := readJSON(w, r, h.cfg.MaxFileBytes+64<<10, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if req.Content == nil {
		h.writeError(w, r, validation("content is required"))
		return
	}
	c, abs, ok := h.fileOp(w, r, req.Path, true)
	if !ok {
		return
	}
	if abs == Workspace {
		h.writeError(w, r, invalidPath(req.Path, "it is the workspace directory"))
		return
	}
	if err := c.WriteFile(r.Context(), abs, []byte(*req.Content), 0); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "path": relPath(abs), "size": len(*req.Content)})
}

// deleteFile removes a file, or a directory with everything in it.
func (h *Handler) deleteFile(w http.ResponseWriter, r *http.Request) {
	c, abs, ok := h.fileOp(w, r, r.URL.Query().Get("path"), true)
	if !ok {
		return
	}
	if abs == Workspace {
		h.writeError(w, r, invalidPath(r.URL.Query().Get("path"), "the workspace itself cannot be deleted"))
		return
	}
	info, err := c.Info(r.Context(), abs)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if info[abs].Type == "directory" {
		err = c.RemoveDirs(r.Context(), abs)
	} else {
		err = c.RemoveFiles(r.Context(), abs)
	}
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// entry is Bay's FileInfo.
type entry struct {
	Name       string    `json:"name"`
	Path       string    `json:"path"`
	IsDir      bool      `json:"is_dir"`
	Size       *int64    `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
}

// listDir lists a directory's children (default: the workspace).
func (h *Handler) listDir(w http.ResponseWriter, r *http.Request) {
	c, abs, ok := h.fileOp(w, r, r.URL.Query().Get("path"), false)
	if !ok {
		return
	}
	infos, err := c.ListDir(r.Context(), abs, 1)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	entries := make([]entry, 0, len(infos))
	for _, fi := range infos {
		e := entry{Name: path.Base(fi.Path), Path: relPath(fi.Path), IsDir: fi.Type == "directory", ModifiedAt: fi.ModifiedAt}
		if !e.IsDir {
			size := fi.Size
			e.Size = &size
		}
		entries = append(entries, e)
	}
	writeJSON(w, http.StatusOK, map[string]any{"path": relPath(abs), "entries": entries})
}

// upload streams the multipart part "file" to the part "path"; the body
// has no size bound and no read deadline once authenticated (the box's
// disk bounds it). A file part that comes before the path part is spooled
// to a temporary file first.
func (h *Handler) upload(w http.ResponseWriter, r *http.Request) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Time{})
	mr, err := r.MultipartReader()
	if err != nil {
		h.writeError(w, r, validation("a multipart/form-data body with parts path and file is required"))
		return
	}
	var (
		target string
		spool  *os.File
	)
	defer func() {
		if spool != nil {
			spool.Close()
			os.Remove(spool.Name())
		}
	}()
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			h.writeError(w, r, validation("read multipart body: "+err.Error()))
			return
		}
		switch part.FormName() {
		case "path":
			b, err := io.ReadAll(io.LimitReader(part, 8<<10))
			if err != nil {
				h.writeError(w, r, validation("read path: "+err.Error()))
				return
			}
			target = string(b)
		case "file":
			if target != "" {
				h.uploadFrom(w, r, target, part)
				return
			}
			if spool, err = os.CreateTemp("", "astrabox-upload-"); err != nil {
				h.writeError(w, r, err)
				return
			}
			if _, err := io.Copy(spool, part); err != nil {
				h.writeError(w, r, validation("read file: "+err.Error()))
				return
			}
		}
		part.Close()
	}
	if spool == nil {
		h.writeError(w, r, validation("the file part is required"))
		return
	}
	if target == "" {
		h.writeError(w, r, validation("the path part is required"))
		return
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.uploadFrom(w, r, target, spool)
}

func (h *Handler) uploadFrom(w http.ResponseWriter, r *http.Request, target string, src io.Reader) {
	c, abs, ok := h.fileOp(w, r, target, true)
	if !ok {
		return
	}
	if abs == Workspace {
		h.writeError(w, r, invalidPath(target, "it is the workspace directory"))
		return
	}
	n := &counter{r: src}
	if err := c.Upload(r.Context(), abs, n, execdclient.UploadOptions{}); err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "path": relPath(abs), "size": n.n})
}

type counter struct {
	r io.Reader
	n int64
}

func (c *counter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// download streams a file's bytes as application/octet-stream.
func (h *Handler) download(w http.ResponseWriter, r *http.Request) {
	c, abs, ok := h.fileOp(w, r, r.URL.Query().Get("path"), true)
	if !ok {
		return
	}
	info, err := c.Info(r.Context(), abs)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	fi := info[abs]
	if fi.Type == "directory" {
		h.writeError(w, r, validation("path "+quote(relPath(abs))+" is a directory"))
		return
	}
	body, err := c.Download(r.Context(), abs, 0, 0)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	defer body.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": path.Base(abs)}))
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size, 10))
	w.WriteHeader(http.StatusOK)
	if _, err := io.Copy(w, body); err != nil && r.Context().Err() == nil {
		h.log.Warn("download", "sandbox_id", r.PathValue("id"), "path", abs, "err", err)
	}
}
