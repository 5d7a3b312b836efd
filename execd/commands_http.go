package execd

import (
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// terminateGrace is how long DELETE /command waits between SIGTERM and
// SIGKILL.
const terminateGrace = 2 * time.Second

func (s *Server) registerCommands() {
	s.mux.HandleFunc("POST /command", s.handleRunCommand)
	s.mux.HandleFunc("DELETE /command", s.handleInterruptCommand)
	// /command/status/{id} and /command/{id}/logs overlap as patterns, so
	// one route dispatches both.
	s.mux.HandleFunc("GET /command/{a}/{b}", func(w http.ResponseWriter, r *http.Request) {
		a, b := r.PathValue("a"), r.PathValue("b")
		switch {
		case a == "status":
			s.handleCommandStatus(w, r, b)
		case b == "logs":
			s.handleCommandLogs(w, r, a)
		default:
			writeError(w, sandbox.Errorf(sandbox.CodeNotFound, "no route for GET %s", r.URL.Path))
		}
	})
	s.mux.HandleFunc("POST /command/{id}/stdin", s.handleCommandStdin)
	s.mux.HandleFunc("POST /command/{id}/signal", s.handleCommandSignal)
}

// handleRunCommand starts a command and streams its events. A background
// command's stream ends after init; a foreground one's when it finishes.
func (s *Server) handleRunCommand(w http.ResponseWriter, r *http.Request) {
	var req wire.RunCommandRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	sw, err := newEventWriter(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	c, err := s.commands.start(req)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := sw.Event("", wire.EventInit, wire.Event{Type: wire.EventInit, Text: c.id, Timestamp: nowMillis()}); err != nil {
		if c.live != nil {
			c.live.Detach()
		}
		s.onDisconnect(c, req)
		return
	}
	if req.Background {
		_ = sw.Event("", wire.EventComplete, wire.Event{Type: wire.EventComplete, Timestamp: nowMillis()})
		return
	}
	if _, err := streamOutput(r.Context(), sw, c.out, 0, true, c.live); err != nil {
		s.onDisconnect(c, req)
		return
	}
	<-c.done
	_ = writeCompletion(sw, c)
}

func (s *Server) onDisconnect(c *command, req wire.RunCommandRequest) {
	if req.KillOnDisconnect && !req.Background {
		c.kill("client disconnected", syscall.SIGKILL)
	}
}

// writeCompletion writes the final events of a finished shell command.
// A zero exit ends with execution_complete {execution_time, exit_code}. A
// non-zero one ends, as in OpenSandbox, with the spec's error event
// (CommandExecError, evalue = the code), which also carries exit_code and
// execution_time; with byte-exact framing (see wire.FramingBytes)
// execution_complete follows it, so that every finished stream ends with
// one.
func writeCompletion(sw *eventWriter, c *command) error {
	st := c.status()
	if st.ExitCode == nil {
		return nil
	}
	elapsed := st.FinishedAt.Sub(st.StartedAt).Milliseconds()
	if *st.ExitCode != 0 {
		tb := []string{"exit status " + strconv.Itoa(*st.ExitCode)}
		if st.Error != "" {
			tb = []string{st.Error}
		}
		ev := wire.Event{Type: wire.EventError, Timestamp: nowMillis(), ExecutionTime: elapsed, ExitCode: st.ExitCode,
			Error: &wire.ExecError{Name: wire.CommandErrName, Value: strconv.Itoa(*st.ExitCode), Traceback: tb}}
		if err := sw.Event("", ev.Type, ev); err != nil || sw.lines {
			return err
		}
	}
	return sw.Event("", wire.EventComplete, wire.Event{Type: wire.EventComplete, Timestamp: nowMillis(),
		ExecutionTime: elapsed, ExitCode: st.ExitCode})
}

func (s *Server) handleInterruptCommand(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if id == "" {
		writeError(w, sandbox.Errorf(sandbox.CodeMissingQuery, "query parameter id is required"))
		return
	}
	c, err := s.commands.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	c.terminate("interrupted", terminateGrace)
	w.WriteHeader(http.StatusOK)
}

func (s *Server) handleCommandStatus(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.commands.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, c.status())
}

// handleCommandLogs serves a command's output. With `offset` or `follow`
// (additions) it is an event stream resumable by byte offset; otherwise it
// is the OpenSandbox plain-text form, from byte `cursor`, with the next
// cursor in EXECD-COMMANDS-TAIL-CURSOR.
func (s *Server) handleCommandLogs(w http.ResponseWriter, r *http.Request, id string) {
	c, err := s.commands.get(id)
	if err != nil {
		writeError(w, err)
		return
	}
	follow, err := queryBool(r, "follow")
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	if q.Has("offset") || follow || r.Header.Get("Last-Event-ID") != "" {
		offset, err := queryInt64(r, "offset", 0)
		if err != nil {
			writeError(w, err)
			return
		}
		if last := r.Header.Get("Last-Event-ID"); last != "" && !q.Has("offset") {
			if offset, err = strconv.ParseInt(strings.TrimSpace(last), 10, 64); err != nil || offset < 0 {
				writeError(w, sandbox.Errorf(sandbox.CodeInvalidRequest, "Last-Event-ID must be a byte offset, got %q", last))
				return
			}
		}
		sw, err := newEventWriter(w, r)
		if err != nil {
			writeError(w, err)
			return
		}
		sw.Flush()
		if _, err := streamOutput(r.Context(), sw, c.out, offset, follow, nil); err != nil {
			return
		}
		if !c.running() {
			_ = writeCompletion(sw, c)
		}
		return
	}
	cursor, err := queryInt64(r, "cursor", 0)
	if err != nil {
		writeError(w, err)
		return
	}
	data, next, lost := c.out.Bytes(cursor)
	w.Header().Set(wire.HeaderTailCursor, strconv.FormatInt(next, 10))
	if lost > 0 {
		w.Header().Set(wire.HeaderOutputLost, strconv.FormatInt(lost, 10))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

// handleCommandStdin (addition) streams the body into the command's stdin;
// `close=true` closes stdin afterwards.
func (s *Server) handleCommandStdin(w http.ResponseWriter, r *http.Request) {
	c, err := s.commands.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	closeAfter, err := queryBool(r, "close")
	if err != nil {
		writeError(w, err)
		return
	}
	n, err := c.writeStdin(r.Body, closeAfter)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"written": n})
}

// handleCommandSignal (addition) sends a signal to the command's process
// group.
func (s *Server) handleCommandSignal(w http.ResponseWriter, r *http.Request) {
	c, err := s.commands.get(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	var req wire.SignalRequest
	if err := decodeJSON(w, r, s.cfg.MaxJSONBytes, &req, false); err != nil {
		writeError(w, err)
		return
	}
	sig, err := parseSignal(req.Signal)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := c.signal(sig); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}
