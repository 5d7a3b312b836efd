package execd

import (
	"context"
	"net/http"
	"strings"
	"syscall"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func (s *Server) registerCode() {
	s.contexts = &contextTable{cfg: &s.cfg, log: s.log, byID: make(map[string]*codeContext)}
	s.mux.HandleFunc("POST /code/context", s.handleCreateContext)
	s.mux.HandleFunc("GET /code/contexts", s.handleListContexts)
	s.mux.HandleFunc("DELETE /code/contexts", s.handleDeleteContexts)
	s.mux.HandleFunc("GET /code/contexts/{id}", s.handleGetContext)
	s.mux.HandleFunc("DELETE /code/contexts/{id}", s.handleDeleteContext)
	s.mux.HandleFunc("POST /code", s.handleRunCode)
	s.mux.HandleFunc("DELETE /code", s.handleInterruptCode)
}

// closeContexts kills every context and waits for them.
func (s *Server) closeContexts() { s.contexts.removeAll("", true) }

// handleCreateContext starts a context: {language (python default), cwd}.
func (s *Server) handleCreateContext(w http.ResponseWriter, r *http.Request) {
	var req wire.CodeContext
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, true); err != nil {
		writeError(w, err)
		return
	}
	lang, err := normLanguage(req.Language)
	if err != nil {
		writeError(w, err)
		return
	}
	cc, err := s.contexts.create(lang, req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, cc.wire())
}

// queryLanguage reads the language filter; "" unless required.
func queryLanguage(r *http.Request, required bool) (string, error) {
	l := r.URL.Query().Get("language")
	if l == "" {
		if required {
			return "", sandbox.Errorf(sandbox.CodeMissingQuery, "query parameter language is required")
		}
		return "", nil
	}
	return normLanguage(l)
}

// handleListContexts lists the contexts, of ?language= if given.
func (s *Server) handleListContexts(w http.ResponseWriter, r *http.Request) {
	lang, err := queryLanguage(r, false)
	if err != nil {
		writeError(w, err)
		return
	}
	out := []wire.CodeContext{}
	for _, cc := range s.contexts.list(lang) {
		out = append(out, cc.wire())
	}
	writeJSON(w, http.StatusOK, out)
}

// handleDeleteContexts deletes every context of ?language= (required).
func (s *Server) handleDeleteContexts(w http.ResponseWriter, r *http.Request) {
	lang, err := queryLanguage(r, true)
	if err != nil {
		writeError(w, err)
		return
	}
	s.contexts.removeAll(lang, false)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleGetContext(w http.ResponseWriter, r *http.Request) {
	cc, err := s.contexts.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, cc.wire())
}

func (s *Server) handleDeleteContext(w http.ResponseWriter, r *http.Request) {
	if err := s.contexts.remove(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// handleRunCode runs a cell in context.id, or, without an id, in a fresh
// context of context.language (python default) deleted afterwards, and
// streams its events. A client that goes away interrupts the cell.
func (s *Server) handleRunCode(w http.ResponseWriter, r *http.Request) {
	var req wire.RunCodeRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if strings.TrimSpace(req.Code) == "" {
		writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "code is required"))
		return
	}
	sw, err := newEventWriter(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	var cc *codeContext
	if req.Context.ID != "" {
		if cc, err = s.contexts.get(req.Context.ID); err != nil {
			writeError(w, err)
			return
		}
		if req.Context.Language != "" {
			if lang, err := normLanguage(req.Context.Language); err != nil || lang != cc.language {
				writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "context %s is a %s context, not %q", cc.id, cc.language, req.Context.Language))
				return
			}
		}
	} else {
		lang, err := normLanguage(req.Context.Language)
		if err != nil {
			writeError(w, err)
			return
		}
		if cc, err = s.contexts.create(lang, req.Context.Cwd); err != nil {
			writeError(w, err)
			return
		}
		defer func() { _ = s.contexts.remove(cc.id) }()
	}
	if cc.py != nil {
		run, err := cc.py.start(req.Code)
		if err != nil {
			writeError(w, err)
			return
		}
		streamCodeRun(r.Context(), sw, cc.py, run)
		return
	}
	cmdline, settle := req.Code, func(bool) {}
	if cc.gc != nil {
		if cmdline, settle, err = cc.gc.prepare(req.Code); err != nil {
			writeError(w, err)
			return
		}
	}
	if err := validateShellRun(cmdline, "", 0); err != nil {
		settle(false)
		writeError(w, err)
		return
	}
	c, err := cc.sh.start(cmdline, "", 0)
	if err != nil {
		settle(false)
		writeError(w, err)
		return
	}
	go func() {
		<-c.done
		st := c.status()
		settle(st.ExitCode != nil && *st.ExitCode == 0)
	}()
	cc.mu.Lock()
	cc.count++
	n := cc.count
	cc.mu.Unlock()
	streamShellRun(r.Context(), sw, cc.sh, c, cc.id, n)
}

// streamCodeRun writes the events of a python cell: init (context id), the
// output as produced, then execution_count, result, error and
// execution_complete.
func streamCodeRun(ctx context.Context, sw *eventWriter, in *interp, run *codeRun) {
	gone := func() { go in.interrupt() }
	if err := sw.Event("", wire.EventInit, wire.Event{Type: wire.EventInit, Text: in.id, Timestamp: nowMillis()}); err != nil {
		run.rec.live.Detach()
		gone()
		return
	}
	if _, err := streamOutput(ctx, sw, run.rec.out, 0, true, run.rec.live); err != nil {
		gone()
		return
	}
	<-run.rec.done
	var events []wire.Event
	if run.count > 0 {
		events = append(events, wire.Event{Type: wire.EventCount, ExecutionCount: run.count})
	}
	for _, data := range run.results {
		events = append(events, wire.Event{Type: wire.EventResult, ExecutionCount: run.count, Results: resultMap(data)})
	}
	if run.err != nil {
		events = append(events, wire.Event{Type: wire.EventError, Error: run.err})
	}
	st := run.rec.status()
	events = append(events, wire.Event{Type: wire.EventComplete, ExecutionTime: st.FinishedAt.Sub(st.StartedAt).Milliseconds()})
	for _, ev := range events {
		ev.Timestamp = nowMillis()
		if err := sw.Event("", ev.Type, ev); err != nil {
			return
		}
	}
}

// resultMap is the wire form of a result: the MIME map of the spec, plus
// "text", a copy of "text/plain" that OpenSandbox's own server sends and
// its Python SDK reads.
func resultMap(data map[string]string) map[string]any {
	out := make(map[string]any, len(data)+1)
	for k, v := range data {
		out[k] = v
	}
	if v, ok := data["text/plain"]; ok {
		out["text"] = v
	}
	return out
}

// handleInterruptCode interrupts the cell running in context ?id= and
// waits, up to interruptWait, for it to end; the context survives. With
// no cell running it does nothing.
func (s *Server) handleInterruptCode(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, sandbox.Errorf(sandbox.CodeMissingQuery, "query parameter id is required"))
		return
	}
	cc, err := s.contexts.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	if cc.py != nil {
		cc.py.interrupt()
	} else {
		cc.sh.mu.Lock()
		c := cc.sh.cur
		cc.sh.mu.Unlock()
		if c != nil {
			cc.sh.stop(c, "interrupted", syscall.SIGINT)
		}
	}
	w.WriteHeader(http.StatusOK)
}
