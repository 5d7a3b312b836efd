package agent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
)

// agent is one run of the program. The worker goroutine (work and the
// turns it runs) owns history and state; the command reader shares the
// fields under mu with it.
type agent struct {
	cfg    Config
	log    *slog.Logger
	out    *emitter
	conv   *conversation
	tools  *toolbox
	model  *modelClient
	broken retryPolicy // how a model call that broke off is made again
	system string
	specs  []toolSpec

	history []message
	state   string

	mu      sync.Mutex
	queue   []command
	known   map[string]bool // input ids received or recorded
	cancel  context.CancelCauseFunc
	pending *approval
	wake    chan struct{} // a new input or the end of stdin
	eof     chan struct{} // closed when stdin ends
	ended   bool          // stdin ended
}

// approval is a tool call waiting for an answer command.
type approval struct {
	id      string
	answers chan command
}

// errInterrupt is the cause of a reply stopped by an interrupt command.
var errInterrupt = errors.New("interrupted by the user")

func newAgent(cfg Config, stdout io.Writer) (*agent, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	tools, err := newToolbox(cfg.Workspace, cfg.Tools, cfg.ShellTimeout)
	if err != nil {
		return nil, fmt.Errorf("agent config: %w", err)
	}
	if err := os.MkdirAll(cfg.Workspace, 0o755); err != nil {
		return nil, fmt.Errorf("create workspace: %w", err)
	}
	return &agent{
		cfg:    cfg,
		log:    cfg.Logger,
		out:    newEmitter(stdout),
		tools:  tools,
		model:  &modelClient{url: cfg.ModelURL, key: cfg.ModelKey, model: cfg.Model, http: cfg.HTTPClient, attempts: cfg.ConnectAttempts},
		broken: brokenPolicy(cfg.BrokenRetries, cfg.BrokenPause),
		system: systemPrompt(cfg.Workspace, tools.names, cfg.Instructions),
		specs:  toolSpecs(tools.names, int(cfg.ShellTimeout.Seconds())),
		known:  map[string]bool{},
		wake:   make(chan struct{}, 1),
		eof:    make(chan struct{}),
	}, nil
}

// start opens the conversation file, replays it into the history (closing
// a reply that was cut off) and reports ready.
func (a *agent) start() error {
	conv, err := openConversation(a.cfg.StatePath, a.log)
	if err != nil {
		return err
	}
	a.conv = conv
	for _, id := range conv.inputOf {
		a.known[id] = true
	}
	for _, id := range conv.consumed {
		a.known[id] = true
	}
	a.history = append(a.history, conv.messages...)
	fix := repair(conv.messages, conv.inputOf)
	for _, r := range fix {
		a.history = append(a.history, *r.Message)
	}
	if len(fix) > 0 {
		if err := conv.append(fix...); err != nil {
			return err
		}
	}
	a.emit(readyEvent{
		Type:           "ready",
		ConversationID: conv.id,
		Resumed:        conv.resumed,
		Messages:       len(conv.messages),
		Inputs:         append([]string{}, conv.consumed...),
	})
	if len(fix) > 0 {
		a.diag("warn", "the last reply was cut off; it is closed in the history", "records", len(fix))
	}
	if conv.size > conv.loaded {
		a.emit(savedEvent{Type: "state.saved", Bytes: conv.size})
	}
	a.setState(stateIdle)
	return a.out.err()
}

func (a *agent) close() {
	a.out.close()
	if a.conv != nil {
		if err := a.conv.close(); err != nil {
			a.log.Warn("close state file", "err", err)
		}
	}
}

// work answers queued inputs one at a time until stdin has ended and the
// queue is empty, or ctx ends.
func (a *agent) work(ctx context.Context) error {
	for {
		in, tctx, ok := a.next(ctx)
		if !ok {
			break
		}
		a.runTurn(tctx, in)
		a.mu.Lock()
		a.cancel(nil)
		a.cancel = nil
		idle := len(a.queue) == 0
		a.mu.Unlock()
		if idle {
			a.setState(stateIdle)
		}
		if err := a.out.err(); err != nil {
			return err
		}
	}
	if err := a.out.err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("agent stopped: %w", err)
	}
	return nil
}

// next takes the next input and makes the context of its reply, which an
// interrupt cancels. It reports false when ctx ended, or when stdin ended
// and nothing is queued.
func (a *agent) next(ctx context.Context) (command, context.Context, bool) {
	for {
		if ctx.Err() != nil {
			return command{}, nil, false
		}
		a.mu.Lock()
		if len(a.queue) > 0 {
			in := a.queue[0]
			a.queue = a.queue[1:]
			tctx, cancel := context.WithCancelCause(ctx)
			a.cancel = cancel
			a.mu.Unlock()
			return in, tctx, true
		}
		ended := a.ended
		a.mu.Unlock()
		if ended {
			return command{}, nil, false
		}
		select {
		case <-ctx.Done():
		case <-a.wake:
		}
	}
}

// readCommands reads stdin to its end, handling each line.
func (a *agent) readCommands(r io.Reader) {
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, err := readLine(br, maxCommandLine)
		switch {
		case errors.Is(err, errLineTooLong):
			a.diag("warn", "discarded a command line over the size limit", "limit", maxCommandLine)
		case len(line) > 0:
			a.handle(line)
		}
		if err == nil || errors.Is(err, errLineTooLong) && !errors.Is(err, io.EOF) {
			continue
		}
		if !errors.Is(err, io.EOF) {
			a.diag("error", "read stdin: "+err.Error())
		}
		break
	}
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
	close(a.eof)
	a.signal()
}

// handle acts on one command line.
func (a *agent) handle(line []byte) {
	var c command
	if err := json.Unmarshal(line, &c); err != nil {
		if len(bytes.TrimSpace(line)) > 0 {
			a.diag("warn", "ignored a line that is not a JSON command: "+err.Error())
		}
		return
	}
	switch c.Type {
	case cmdInput:
		a.receive(c)
	case cmdInterrupt:
		a.mu.Lock()
		cancel := a.cancel
		a.mu.Unlock()
		if cancel == nil {
			a.diag("info", "interrupt: no reply in progress")
			return
		}
		cancel(errInterrupt)
	case cmdAnswer:
		a.answer(c)
	default:
		a.diag("warn", fmt.Sprintf("ignored unknown command type %q", c.Type))
	}
}

// receive queues an input unless its id is known, and acknowledges it
// either way. An input without an id gets one.
func (a *agent) receive(c command) {
	if c.ID == "" {
		c.ID = newID("in")
	}
	a.mu.Lock()
	known := a.known[c.ID]
	if !known {
		a.known[c.ID] = true
		a.queue = append(a.queue, c)
	}
	// Acknowledge under mu, so input.received precedes input.consumed.
	a.emit(idEvent{Type: "input.received", ID: c.ID})
	a.mu.Unlock()
	if !known {
		a.signal()
	}
}

// answer delivers an answer to the approval it names.
func (a *agent) answer(c command) {
	if c.Decision != "approve" && c.Decision != "reject" {
		a.diag("warn", fmt.Sprintf("ignored an answer with decision %q (want approve or reject)", c.Decision))
		return
	}
	a.mu.Lock()
	p := a.pending
	if p != nil && p.id == c.InteractionID {
		a.pending = nil
	} else {
		p = nil
	}
	a.mu.Unlock()
	if p == nil {
		a.diag("warn", fmt.Sprintf("ignored an answer for interaction %q, which is not pending", c.InteractionID))
		return
	}
	p.answers <- c // buffered; only one answer is delivered
}

func (a *agent) signal() {
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *agent) emit(ev any) { a.out.emit(ev) }

// setState reports the program's state when it changed.
func (a *agent) setState(s string) {
	if a.state == s {
		return
	}
	a.state = s
	a.emit(stateEvent{Type: "state", State: s})
}

// diag logs a diagnostic and writes it as a "log" event.
func (a *agent) diag(level, msg string, args ...any) {
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	a.log.Log(context.Background(), l, msg, args...)
	for i := 0; i+1 < len(args); i += 2 {
		msg += fmt.Sprintf(" %v=%v", args[i], args[i+1])
	}
	a.emit(logEvent{Type: "log", Level: level, Message: msg})
}
