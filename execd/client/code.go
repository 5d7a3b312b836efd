package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/astrabox/astrabox/execd/wire"
)

// Bash sessions and code contexts.

// CreateSession starts a bash session whose shell starts in cwd ("" =
// execd's working directory) and returns its id.
func (c *Client) CreateSession(ctx context.Context, cwd string) (string, error) {
	var resp wire.CreateSessionResponse
	err := c.doJSON(ctx, http.MethodPost, "/session", nil, wire.CreateSessionRequest{Cwd: cwd}, &resp)
	return resp.SessionID, err
}

// RunInSessionStream runs a command in session id and calls fn for every
// event (init, stdout, stderr, error, execution_complete) until the stream
// ends, fn returns an error, or ctx ends. Leaving early interrupts the run.
// A session runs one command at a time: a concurrent run fails with
// CodeConflict.
func (c *Client) RunInSessionStream(ctx context.Context, id string, req wire.RunInSessionRequest, fn func(Event) error) error {
	return c.stream(ctx, request{method: http.MethodPost, path: "/session/" + url.PathEscape(id) + "/run"}, req, fn)
}

// RunInSession runs a command in session id and collects its output and
// exit code. Execution.ID is the session id.
func (c *Client) RunInSession(ctx context.Context, id string, req wire.RunInSessionRequest) (*Execution, error) {
	ex := &Execution{ExitCode: -1, lines: c.lines}
	err := c.RunInSessionStream(ctx, id, req, ex.apply)
	return ex, err
}

// DeleteSession kills session id's shell and everything it started.
func (c *Client) DeleteSession(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/session/"+url.PathEscape(id), nil, nil, nil)
}

// CreateContext starts a code context of req.Language ("python", the
// default, "bash", "javascript", "typescript", "java" or "go"), in req.Cwd
// if set, and returns it with its id. A language whose interpreter the box
// lacks fails with CodeNotSupported, naming the languages the box offers.
func (c *Client) CreateContext(ctx context.Context, req wire.CodeContext) (wire.CodeContext, error) {
	var cc wire.CodeContext
	err := c.doJSON(ctx, http.MethodPost, "/code/context", nil, wire.CodeContext{Language: req.Language, Cwd: req.Cwd}, &cc)
	return cc, err
}

// ListContexts lists the code contexts of language ("" = all).
func (c *Client) ListContexts(ctx context.Context, language string) ([]wire.CodeContext, error) {
	var q url.Values
	if language != "" {
		q = url.Values{"language": {language}}
	}
	var out []wire.CodeContext
	err := c.doJSON(ctx, http.MethodGet, "/code/contexts", q, nil, &out)
	return out, err
}

// GetContext returns code context id.
func (c *Client) GetContext(ctx context.Context, id string) (wire.CodeContext, error) {
	var cc wire.CodeContext
	err := c.doJSON(ctx, http.MethodGet, "/code/contexts/"+url.PathEscape(id), nil, nil, &cc)
	return cc, err
}

// DeleteContext deletes code context id and ends its interpreter.
func (c *Client) DeleteContext(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/code/contexts/"+url.PathEscape(id), nil, nil, nil)
}

// DeleteContexts deletes every code context of language.
func (c *Client) DeleteContexts(ctx context.Context, language string) error {
	return c.doJSON(ctx, http.MethodDelete, "/code/contexts", url.Values{"language": {language}}, nil, nil)
}

// RunCodeStream runs code in req.Context.ID, or, without an id, in a fresh
// context of req.Context.Language that is deleted afterwards, and calls fn
// for every event (init, stdout, stderr, execution_count, result, error,
// execution_complete) until the stream ends, fn returns an error, or ctx
// ends. Leaving early interrupts the code.
func (c *Client) RunCodeStream(ctx context.Context, req wire.RunCodeRequest, fn func(Event) error) error {
	return c.stream(ctx, request{method: http.MethodPost, path: "/code"}, req, fn)
}

// CodeExecution is the collected outcome of RunCode.
type CodeExecution struct {
	// ContextID is the context the code ran in (from init).
	ContextID string
	Stdout    []byte
	Stderr    []byte
	// Results are the MIME maps of result events ("text/plain", ...).
	Results []map[string]any
	// Error is the exception (python, javascript, typescript, java) or
	// the non-zero exit (bash, go), if any.
	Error          *wire.ExecError
	ExecutionCount int
	// ExitCode is a bash context's exit code; -1 when not reported.
	ExitCode int
	// ExecutionTime is the run's duration in milliseconds.
	ExecutionTime int64
	// Complete is true once execution_complete was received.
	Complete bool

	lines bool // events are lines (WithLineFraming)
}

// Text returns the "text/plain" of the last result, or "".
func (e *CodeExecution) Text() string {
	for i := len(e.Results) - 1; i >= 0; i-- {
		if s, ok := e.Results[i]["text/plain"].(string); ok {
			return s
		}
	}
	return ""
}

func (e *CodeExecution) apply(ev Event) error {
	switch ev.Type {
	case wire.EventInit:
		e.ContextID = ev.Text
	case wire.EventStdout:
		e.Stdout = appendOutput(e.Stdout, ev.Text, e.lines)
	case wire.EventStderr:
		e.Stderr = appendOutput(e.Stderr, ev.Text, e.lines)
	case wire.EventCount:
		e.ExecutionCount = ev.ExecutionCount
	case wire.EventResult:
		e.Results = append(e.Results, ev.Results)
	case wire.EventError:
		e.Error = ev.Error
		if ev.ExitCode != nil {
			e.ExitCode = *ev.ExitCode
		}
	case wire.EventComplete:
		e.Complete = true
		e.ExecutionTime = ev.ExecutionTime
		if ev.ExitCode != nil {
			e.ExitCode = *ev.ExitCode
		}
	}
	return nil
}

// RunCode runs code like RunCodeStream and collects the outcome. An
// exception in the code is CodeExecution.Error, not an error return.
func (c *Client) RunCode(ctx context.Context, req wire.RunCodeRequest) (*CodeExecution, error) {
	e := &CodeExecution{ExitCode: -1, lines: c.lines}
	err := c.RunCodeStream(ctx, req, e.apply)
	return e, err
}

// InterruptCode interrupts the code running in context id (SIGINT: a
// python KeyboardInterrupt) and returns once it ended (or after a bound);
// the context keeps its state.
func (c *Client) InterruptCode(ctx context.Context, id string) error {
	return c.doJSON(ctx, http.MethodDelete, "/code", url.Values{"id": {id}}, nil, nil)
}
