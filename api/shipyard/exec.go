package shipyard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/store"
)

// Exec timeouts, in seconds: Bay's default, and the most this server
// accepts (Bay's clients send 1 to 300).
const (
	defaultExecTimeout = 30
	maxExecTimeout     = 3600
)

// execGrace is how long past its timeout an exec's call to execd may take
// (execd kills the command at the timeout; its answer follows).
const execGrace = 10 * time.Second

type shellRequest struct {
	Command     string  `json:"command"`
	Timeout     *int64  `json:"timeout"`
	Cwd         *string `json:"cwd"`
	IncludeCode bool    `json:"include_code"`
	Description *string `json:"description"`
	Tags        *string `json:"tags"`
}

// shellResult is Bay's ShellExecResponse.
type shellResult struct {
	Success         bool    `json:"success"`
	Output          string  `json:"output"`
	Error           *string `json:"error"`
	ExitCode        int     `json:"exit_code"`
	ExecutionID     string  `json:"execution_id"`
	ExecutionTimeMs int64   `json:"execution_time_ms"`
	Command         *string `json:"command"`
}

func execTimeout(t *int64) (time.Duration, error) {
	if t == nil {
		return defaultExecTimeout * time.Second, nil
	}
	if *t < 1 || *t > maxExecTimeout {
		return 0, validation("timeout must be 1 to " + strconv.Itoa(maxExecTimeout) + " seconds")
	}
	return time.Duration(*t) * time.Second, nil
}

// shellExec runs a command through bash in the box, in cwd (relative to
// /workspace; default /workspace). A non-zero exit is data (success false
// with the exit code), as is a timeout (exit code -1 or the signal's, and
// a note in error). Processes the command leaves in the background keep
// running after it returns. An exec on a sandbox that is still starting
// waits for it.
func (h *Handler) shellExec(w http.ResponseWriter, r *http.Request) {
	var req shellRequest
	if _, err := readJSON(w, r, h.cfg.MaxBodyBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if strings.TrimSpace(req.Command) == "" {
		h.writeError(w, r, validation("command is required"))
		return
	}
	timeout, err := execTimeout(req.Timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	cwd := Workspace
	if req.Cwd != nil && *req.Cwd != "" {
		if cwd, err = resolvePath(*req.Cwd); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	rec, c, err := h.ready(r.Context(), r.PathValue("id"), h.cfg.StartWait, true)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	start := time.Now()
	out, err := h.runShell(r.Context(), c, wire.RunCommandRequest{Command: req.Command, Cwd: cwd, Timeout: timeout.Milliseconds(),
		KillOnDisconnect: true}, timeout)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	res := shellResult{Success: out.exit == 0, Output: out.stdout.String(), ExitCode: out.exit,
		ExecutionTimeMs: time.Since(start).Milliseconds()}
	if errText := out.errorText(); errText != "" {
		res.Error = &errText
	}
	if req.IncludeCode {
		res.Command = &req.Command
	}
	res.ExecutionID = h.record(r.Context(), rec, "shell", req.Command, res.Success, res.ExecutionTimeMs, res.Output, res.Error, req.Description, req.Tags)
	writeJSON(w, http.StatusOK, res)
}

// shellOutput collects a command's stream, each output bounded.
type shellOutput struct {
	stdout, stderr capped
	exit           int
	note           string // why it ended early (a timeout), for error
}

func (o *shellOutput) errorText() string {
	s := o.stderr.String()
	if o.note != "" {
		if s != "" && !strings.HasSuffix(s, "\n") {
			s += "\n"
		}
		s += o.note
	}
	return s
}

func (h *Handler) runShell(ctx context.Context, c *execdclient.Client, req wire.RunCommandRequest, timeout time.Duration) (*shellOutput, error) {
	out := &shellOutput{stdout: capped{max: h.cfg.MaxOutputBytes}, stderr: capped{max: h.cfg.MaxOutputBytes}, exit: -1}
	rctx, cancel := context.WithTimeout(ctx, timeout+execGrace)
	defer cancel()
	start := time.Now()
	err := c.RunStream(rctx, req, func(ev execdclient.Event) error {
		switch ev.Type {
		case wire.EventStdout:
			out.stdout.add(ev.Text)
		case wire.EventStderr:
			out.stderr.add(ev.Text)
		case wire.EventError:
			if ev.ExitCode != nil {
				out.exit = *ev.ExitCode
			}
			if ev.Error != nil && strings.Contains(ev.Error.Value, "timed out") {
				out.note = "command timed out after " + timeout.String()
			}
		case wire.EventComplete:
			if ev.ExitCode != nil {
				out.exit = *ev.ExitCode
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			out.note = "command timed out after " + timeout.String()
			return out, nil
		}
		return nil, err
	}
	if out.exit != 0 && time.Since(start) >= timeout {
		// execd killed it at the timeout (exit 137: SIGKILL).
		out.note = "command timed out after " + timeout.String()
	}
	return out, nil
}

// capped is a string builder that keeps at most max bytes and notes what
// it dropped.
type capped struct {
	b       strings.Builder
	max     int
	dropped int64
}

func (c *capped) add(s string) {
	if room := c.max - c.b.Len(); room > 0 {
		if len(s) > room {
			c.dropped += int64(len(s) - room)
			s = s[:room]
		}
		c.b.WriteString(s)
		return
	}
	c.dropped += int64(len(s))
}

func (c *capped) String() string {
	if c.dropped > 0 {
		return strings.ToValidUTF8(c.b.String(), "\uFFFD") + "\n[... " + strconv.FormatInt(c.dropped, 10) + " more bytes dropped]\n"
	}
	return c.b.String()
}

// historyOutputBytes bounds the output kept in a history entry.
const historyOutputBytes = 64 << 10

// record appends an execution to the sandbox's history and returns its id.
// A failure to record is logged: the exec itself happened and is answered.
func (h *Handler) record(ctx context.Context, rec *store.Sandbox, typ, code string, ok bool, ms int64, output string, errText, desc, tags *string) string {
	id := newExecutionID()
	e := &store.Execution{ID: id, SandboxID: rec.ID, Type: typ, Code: code, Success: ok, ExecutionTimeMs: ms,
		Output: clip(output, historyOutputBytes), Description: desc, Tags: tags}
	if errText != nil {
		s := clip(*errText, historyOutputBytes)
		e.Error = &s
	}
	if err := h.st.AppendExecution(context.WithoutCancel(ctx), e); err != nil {
		h.log.Warn("record execution", "sandbox_id", rec.ID, "err", err)
	}
	return id
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "\n[... truncated]"
}

func newExecutionID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "exe-" + hex.EncodeToString(b[:])
}
