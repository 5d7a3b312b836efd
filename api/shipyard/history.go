package shipyard

import (
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/store"
)

// historyEntry is Bay's ExecutionHistoryEntry.
type historyEntry struct {
	ID              string    `json:"id"`
	SessionID       *string   `json:"session_id"`
	ExecType        string    `json:"exec_type"`
	Code            string    `json:"code"`
	Success         bool      `json:"success"`
	ExecutionTimeMs int64     `json:"execution_time_ms"`
	Output          string    `json:"output"`
	Error           *string   `json:"error"`
	Description     *string   `json:"description"`
	Tags            *string   `json:"tags"`
	Notes           *string   `json:"notes"`
	CreatedAt       time.Time `json:"created_at"`
}

func toEntry(e *store.Execution) historyEntry {
	return historyEntry{ID: e.ID, ExecType: e.Type, Code: e.Code, Success: e.Success, ExecutionTimeMs: e.ExecutionTimeMs,
		Output: e.Output, Error: e.Error, Description: e.Description, Tags: e.Tags, Notes: e.Notes, CreatedAt: e.CreatedAt}
}

// execTypeParam reads exec_type: "", "python" or "shell".
func execTypeParam(s string) (string, error) {
	switch s {
	case "", "python", "shell":
		return s, nil
	}
	return "", validation("exec_type must be python or shell")
}

// listHistory answers {entries, total}, newest first.
func (h *Handler) listHistory(w http.ResponseWriter, r *http.Request) {
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	var f store.ExecutionFilter
	if f.Type, err = execTypeParam(q.Get("exec_type")); err != nil {
		h.writeError(w, r, err)
		return
	}
	if v := q.Get("success_only"); v != "" {
		if f.SuccessOnly, err = strconv.ParseBool(v); err != nil {
			h.writeError(w, r, validation("success_only must be true or false"))
			return
		}
	}
	if f.Limit, err = intParam(q.Get("limit"), 100, 1, 500, "limit"); err != nil {
		h.writeError(w, r, err)
		return
	}
	if f.Offset, err = intParam(q.Get("offset"), 0, 0, 1<<30, "offset"); err != nil {
		h.writeError(w, r, err)
		return
	}
	list, total, err := h.st.ListExecutions(r.Context(), rec.ID, f)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	entries := make([]historyEntry, 0, len(list))
	for _, e := range list {
		entries = append(entries, toEntry(e))
	}
	writeJSON(w, http.StatusOK, map[string]any{"entries": entries, "total": total})
}

// lastHistory answers the newest execution (of exec_type), or not_found.
func (h *Handler) lastHistory(w http.ResponseWriter, r *http.Request) {
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	typ, err := execTypeParam(r.URL.Query().Get("exec_type"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	list, _, err := h.st.ListExecutions(r.Context(), rec.ID, store.ExecutionFilter{Type: typ, Limit: 1})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if len(list) == 0 {
		h.writeError(w, r, newError(http.StatusNotFound, codeNotFound, "sandbox "+rec.ID+" has no executions"))
		return
	}
	writeJSON(w, http.StatusOK, toEntry(list[0]))
}

func (h *Handler) getHistory(w http.ResponseWriter, r *http.Request) {
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	e, err := h.st.GetExecution(r.Context(), rec.ID, r.PathValue("eid"))
	if err != nil {
		h.writeError(w, r, h.historyErr(err, r.PathValue("eid")))
		return
	}
	writeJSON(w, http.StatusOK, toEntry(e))
}

// annotateHistory sets the description, tags and notes given (others keep
// theirs).
func (h *Handler) annotateHistory(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Description *string `json:"description"`
		Tags        *string `json:"tags"`
		Notes       *string `json:"notes"`
	}
	if _, err := readJSON(w, r, h.cfg.MaxBodyBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	rec, err := h.get(r.Context(), r.PathValue("id"))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	e, err := h.st.AnnotateExecution(r.Context(), rec.ID, r.PathValue("eid"), store.ExecutionNotes{Description: req.Description, Tags: req.Tags, Notes: req.Notes})
	if err != nil {
		h.writeError(w, r, h.historyErr(err, r.PathValue("eid")))
		return
	}
	writeJSON(w, http.StatusOK, toEntry(e))
}

func (h *Handler) historyErr(err error, id string) error {
	if errors.Is(err, store.ErrNotFound) {
		return newError(http.StatusNotFound, codeNotFound, "execution "+quote(id)+" not found")
	}
	return err
}
