package execd

import (
	"context"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func (s *Server) registerSessions() {
	s.sessions = &sessionTable{cfg: &s.cfg, log: s.log, byID: make(map[string]*shell)}
	s.mux.HandleFunc("POST /session", s.handleCreateSession)
	s.mux.HandleFunc("POST /session/{id}/run", s.handleRunInSession)
	s.mux.HandleFunc("DELETE /session/{id}", s.handleDeleteSession)
}

// closeSessions kills every session's shell and waits for them.
func (s *Server) closeSessions() { s.sessions.closeAll() }

// handleCreateSession starts a shell; the body ({cwd}) is optional.
func (s *Server) handleCreateSession(w http.ResponseWriter, r *http.Request) {
	var req wire.CreateSessionRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, true); err != nil {
		writeError(w, err)
		return
	}
	sh, err := s.sessions.create(req.Cwd)
	if err != nil {
		writeError(w, err)
		return
	}
	s.log.Debug("session created", "session_id", sh.id)
	writeJSON(w, http.StatusOK, wire.CreateSessionResponse{SessionID: sh.id})
}

// handleRunInSession runs a command in a session and streams its events
// like POST /command; init carries the session id.
func (s *Server) handleRunInSession(w http.ResponseWriter, r *http.Request) {
	sh, err := s.sessions.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	var req wire.RunInSessionRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	if err := validateShellRun(req.Command, req.Cwd, req.Timeout); err != nil {
		writeError(w, err)
		return
	}
	sw, err := newEventWriter(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := sh.start(req.Command, req.Cwd, time.Duration(req.Timeout)*time.Millisecond)
	if err != nil {
		writeError(w, err)
		return
	}
	streamShellRun(r.Context(), sw, sh, c, sh.id, 0)
}

// validateShellRun checks a run's command, cwd and timeout (ms). An
// absolute cwd must be an existing directory; a relative one is resolved
// by the shell, against its current directory.
func validateShellRun(command, cwd string, timeout int64) error {
	switch {
	case strings.TrimSpace(command) == "":
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "command is required")
	case strings.IndexByte(command, 0) >= 0:
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "command contains a NUL byte")
	case timeout < 0:
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "timeout must not be negative")
	case strings.IndexByte(cwd, 0) >= 0:
		return sandbox.Errorf(sandbox.CodeInvalidPath, "working directory contains a NUL byte")
	case filepath.IsAbs(cwd):
		_, err := resolveDir("", cwd)
		return err
	}
	return nil
}

// streamShellRun writes the events of shell run c: init (initID), the
// output as produced, then, when count > 0, execution_count, and the
// completion (writeCompletion). A client that goes away interrupts the run.
func streamShellRun(ctx context.Context, sw *eventWriter, sh *shell, c *command, initID string, count int) {
	gone := func() { go sh.stop(c, "client disconnected", syscall.SIGINT) }
	if err := sw.Event("", wire.EventInit, wire.Event{Type: wire.EventInit, Text: initID, Timestamp: nowMillis()}); err != nil {
		c.live.Detach()
		gone()
		return
	}
	if _, err := streamOutput(ctx, sw, c.out, 0, true, c.live); err != nil {
		gone()
		return
	}
	<-c.done
	if count > 0 {
		if err := sw.Event("", wire.EventCount, wire.Event{Type: wire.EventCount, ExecutionCount: count, Timestamp: nowMillis()}); err != nil {
			return
		}
	}
	_ = writeCompletion(sw, c)
}

// handleDeleteSession kills a session's shell and everything it started.
func (s *Server) handleDeleteSession(w http.ResponseWriter, r *http.Request) {
	if err := s.sessions.remove(r.PathValue("id")); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
