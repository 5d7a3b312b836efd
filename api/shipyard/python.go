package shipyard

import (
	"context"
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
)

// shim is the display capture run once in every python context (see
// shim.py); collectCell runs after every cell and reports what the cell
// displayed.
//
//go:embed shim.py
var shim string

const collectCell = "__astrabox_shipyard_collect()"

type pythonRequest struct {
	Code        string  `json:"code"`
	Timeout     *int64  `json:"timeout"`
	IncludeCode bool    `json:"include_code"`
	Description *string `json:"description"`
	Tags        *string `json:"tags"`
}

// pythonResult is Bay's PythonExecResponse.
type pythonResult struct {
	Success         bool       `json:"success"`
	Output          string     `json:"output"`
	Error           *string    `json:"error"`
	Data            pythonData `json:"data"`
	ExecutionID     string     `json:"execution_id"`
	ExecutionTimeMs int64      `json:"execution_time_ms"`
	Code            *string    `json:"code"`
}

type pythonData struct {
	ExecutionCount int          `json:"execution_count"`
	Output         pythonOutput `json:"output"`
}

type pythonOutput struct {
	Text   string              `json:"text"`
	Images []map[string]string `json:"images"`
}

// pythonExec runs a cell in the sandbox's python context, which keeps its
// state between calls as IPython does: output is what the cell printed
// followed by the value of its last expression; images are what it
// displayed (display(), objects with _repr_png_, matplotlib figures). One
// cell runs at a time per sandbox: a concurrent exec waits its turn. An
// exception is data (success false, the traceback in error), as is a
// timeout (the cell is interrupted; the state is kept).
func (h *Handler) pythonExec(w http.ResponseWriter, r *http.Request) {
	var req pythonRequest
	if _, err := readJSON(w, r, h.cfg.MaxBodyBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	timeout, err := execTimeout(req.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	rec, c, err := h.ready(r.Context(), r.PathValue("id"), h.cfg.StartWait, true)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	b := h.box(rec.ID)
	select {
	case <-b.py:
		defer func() { b.py <- struct{}{} }()
	case <-r.Context().Done():
		h.writeError(w, r, r.Context().Err())
		return
	}
	start := time.Now()
	res, err := h.runCell(r.Context(), rec, c, req.Code, timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res.ExecutionTimeMs = time.Since(start).Milliseconds()
	if req.IncludeCode {
		res.Code = &req.Code
	}
	res.ExecutionID = h.record(r.Context(), rec, "python", req.Code, res.Success, res.ExecutionTimeMs, res.Output, res.Error, req.Description, req.Tags)
	writeJSON(w, http.StatusOK, res)
}

// runCell runs code in the box's context (made on first use, and again
// when its interpreter has ended), then collects what it displayed. The
// caller holds the box's python turn.
func (h *Handler) runCell(ctx context.Context, rec *store.Sandbox, c *execdclient.Client, code string, timeout time.Duration) (*pythonResult, error) {
	var ex *execdclient.CodeExecution
	for attempt := 0; ; attempt++ {
		id, err := h.pythonContext(ctx, rec, c)
		if err != nil {
			return nil, err
		}
		cctx, cancel := context.WithTimeout(ctx, timeout)
		ex, err = c.RunCode(cctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: code})
		timedOut := cctx.Err() != nil && ctx.Err() == nil
		cancel()
		if timedOut {
			// Leaving the stream interrupted the cell; make sure it is over
			// before the next one comes.
			ictx, icancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if err := c.InterruptCode(ictx, id); err != nil {
				h.log.Warn("interrupt python cell", "sandbox_id", rec.ID, "err", err)
			}
			icancel()
			msg := "TimeoutError: execution exceeded the timeout of " + timeout.String() + " and was interrupted"
			return &pythonResult{Output: string(ex.Stdout), Error: &msg, Data: pythonData{Output: pythonOutput{Text: string(ex.Stdout), Images: []map[string]string{}}}}, nil
		}
		if err != nil && attempt == 0 && contextGone(err) {
			h.dropPython(ctx, rec)
			continue // a fresh interpreter, once
		}
		if err != nil {
			return nil, err
		}
		break
	}
	res := &pythonResult{Success: ex.Error == nil}
	text := string(ex.Stdout)
	if v := ex.Text(); v != "" {
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		text += v + "\n"
	}
	var errText string
	if len(ex.Stderr) > 0 {
		errText = string(ex.Stderr)
	}
	if ex.Error != nil {
		if errText != "" && !strings.HasSuffix(errText, "\n") {
			errText += "\n"
		}
		tb := strings.Join(ex.Error.Traceback, "\n")
		if tb == "" {
			tb = ex.Error.Name + ": " + ex.Error.Value
		}
		errText += tb
	}
	if errText != "" {
		res.Error = &errText
	}
	count, images, extra := h.collect(ctx, rec, c)
	text += extra
	res.Output = text
	res.Data = pythonData{ExecutionCount: count, Output: pythonOutput{Text: text, Images: images}}
	return res, nil
}

// contextGone reports whether err says the context's interpreter is gone
// (it exited, or execd no longer knows it).
func contextGone(err error) bool {
	code := execdclient.CodeOf(err)
	return code == sandbox.CodeContextNotFound ||
		(code == sandbox.CodeConflict && strings.Contains(err.Error(), "has ended"))
}

// collected is the shim's report.
type collected struct {
	Count int              `json:"count"`
	Items []map[string]any `json:"items"`
}

// collect runs the shim's collector: the execution count, the PNG images
// the cell displayed, and the text of displayed objects without one. A
// context whose shim is gone (the cell deleted it) gets it again.
func (h *Handler) collect(ctx context.Context, rec *store.Sandbox, c *execdclient.Client) (int, []map[string]string, string) {
	images := []map[string]string{}
	b := h.box(rec.ID)
	b.mu.Lock()
	id := b.pyctx
	b.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ex, err := c.RunCode(cctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: collectCell})
	var got collected
	if err == nil && ex.Error == nil {
		line := strings.TrimSpace(string(ex.Stdout))
		if i := strings.LastIndexByte(line, '\n'); i >= 0 {
			line = line[i+1:]
		}
		err = json.Unmarshal([]byte(line), &got)
	}
	if err != nil || ex.Error != nil {
		h.log.Warn("collect python display data; installing the shim again", "sandbox_id", rec.ID, "err", err)
		if _, err := c.RunCode(cctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: id}, Code: shim}); err != nil {
			h.log.Warn("install python shim", "sandbox_id", rec.ID, "err", err)
		}
		return 0, images, ""
	}
	var extra strings.Builder
	for _, it := range got.Items {
		if png, ok := it["image/png"].(string); ok && png != "" {
			images = append(images, map[string]string{"image/png": png})
			continue
		}
		if t, ok := it["text/plain"].(string); ok {
			extra.WriteString(t + "\n")
		}
	}
	return got.Count, images, extra.String()
}

// pythonContext returns the box's python context: the one in memory, the
// one the record names (after a restart), or a new one in /workspace with
// the shim installed, whose id the record then keeps.
func (h *Handler) pythonContext(ctx context.Context, rec *store.Sandbox, c *execdclient.Client) (string, error) {
	b := h.box(rec.ID)
	b.mu.Lock()
	id := b.pyctx
	b.mu.Unlock()
	if id != "" {
		return id, nil
	}
	if id = rec.Metadata[metaPyContext]; id != "" {
		if _, err := c.GetContext(ctx, id); err == nil {
			b.mu.Lock()
			b.pyctx = id
			b.mu.Unlock()
			return id, nil
		}
	}
	cc, err := c.CreateContext(ctx, wire.CodeContext{Language: "python", Cwd: Workspace})
	if err != nil {
		if code := execdclient.CodeOf(err); code == sandbox.CodeNotSupported || code == sandbox.CodeCapability {
			return "", capability("python", "capability python is not available in this sandbox's image: "+err.Error())
		}
		return "", err
	}
	ex, err := c.RunCode(ctx, wire.RunCodeRequest{Context: wire.CodeContext{ID: cc.ID}, Code: shim})
	if err == nil && ex.Error != nil {
		h.log.Warn("install python shim", "sandbox_id", rec.ID, "error", ex.Error.Name+": "+ex.Error.Value)
	} else if err != nil {
		return "", err
	}
	v := cc.ID
	if _, err := h.svc.PatchMetadata(ctx, rec.ID, map[string]*string{metaPyContext: &v}); err != nil {
		h.log.Warn("remember python context", "sandbox_id", rec.ID, "err", err)
	}
	b.mu.Lock()
	b.pyctx = cc.ID
	b.mu.Unlock()
	return cc.ID, nil
}

// dropPython forgets the box's python context (its interpreter is gone).
func (h *Handler) dropPython(ctx context.Context, rec *store.Sandbox) {
	b := h.box(rec.ID)
	b.mu.Lock()
	b.pyctx = ""
	b.mu.Unlock()
	if _, err := h.svc.PatchMetadata(ctx, rec.ID, map[string]*string{metaPyContext: nil}); err != nil {
		h.log.Warn("forget python context", "sandbox_id", rec.ID, "err", err)
	}
	delete(rec.Metadata, metaPyContext)
}

// resetPython ends the box's python context, if any (stop on a backend
// that cannot pause).
func (h *Handler) resetPython(ctx context.Context, rec *store.Sandbox) {
	b := h.box(rec.ID)
	b.mu.Lock()
	id := b.pyctx
	if id == "" {
		id = rec.Metadata[metaPyContext]
	}
	b.mu.Unlock()
	if id == "" {
		return
	}
	if c, err := h.execd(ctx, rec); err == nil {
		_ = c.DeleteContext(ctx, id)
	}
	h.dropPython(ctx, rec)
}
