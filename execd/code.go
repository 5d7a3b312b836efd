package execd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/pydriver"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// Code contexts (/code, /code/context, /code/contexts).
//
// A python context is one `python -u` process running the embedded driver
// (package pydriver): cells keep their state in its __main__, a trailing
// expression's repr is the result, an exception is an error event with a
// traceback, and SIGINT to its process group interrupts a running cell
// with KeyboardInterrupt. A bash context is a bash session (session.go).
// One cell runs at a time per context; another is refused with CONFLICT.

// Supported context languages.
const (
	langPython = "python"
	langBash   = "bash"
)

const (
	// driverStartTimeout bounds an interpreter's start, up to "ready".
	driverStartTimeout = 30 * time.Second
	// markerIdle bounds the wait for the output markers once the driver
	// reported a run done (they were written just before), counted from
	// the last output delivered: a marker the driver believed it wrote to
	// the pipe may still go astray (an fd shared with a process that
	// redirected it).
	markerIdle = 2 * time.Second
	// interruptWait bounds how long DELETE /code waits for the cell to
	// start and then to end.
	interruptWait = 10 * time.Second
	// interruptRepeat is how often DELETE /code repeats its SIGINT while
	// the cell runs on.
	interruptRepeat = time.Second
)

// normLanguage validates a language name; "" means python.
func normLanguage(s string) (string, error) {
	switch l := strings.ToLower(strings.TrimSpace(s)); l {
	case "", langPython, "python3":
		return langPython, nil
	case langBash:
		return langBash, nil
	default:
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "language %q is not supported (supported: python, bash)", s)
	}
}

// interp is a python interpreter running the driver.
type interp struct {
	id     string
	log    *slog.Logger
	pid    int
	reqW   *os.File
	limit  int64 // output retained per run and stream
	out    framedOutput
	ready  chan string   // receives the python version once
	exited chan struct{} // closed once reaped and all pipes drained
	status int           // exit status; valid once exited is closed

	busy sync.Mutex // held for the whole of a run
	mu   sync.Mutex
	cur  *codeRun
}

// codeRun is one cell run in an interpreter. Its fields are written by
// the control reader and read once rec.done is closed.
type codeRun struct {
	rec     *command
	fr      *framedRun
	started chan struct{}
	ctlDone chan struct{}
	count   int
	results []map[string]string
	err     *wire.ExecError
	marked  []outlog.Stream
}

// startInterp starts python (resolved against the box's PATH) in dir and
// waits until the driver is ready. A missing interpreter is NOT_SUPPORTED.
func startInterp(cfg *Config, log *slog.Logger, id, dir string) (*interp, error) {
	python, err := lookPath(cfg.Python, cfg.Env)
	if err != nil {
		return nil, sandbox.Errorf(sandbox.CodeNotSupported, "python interpreter %q not found in the box; python code contexts need it (%v)", cfg.Python, err)
	}
	var files []*os.File
	pipe := func() (r, w *os.File) {
		if err != nil {
			return nil, nil
		}
		r, w, err = os.Pipe()
		files = append(files, r, w)
		return r, w
	}
	outR, outW := pipe()
	errR, errW := pipe()
	reqR, reqW := pipe()
	ctlR, ctlW := pipe()
	if err != nil {
		closeAll(files...)
		return nil, fmt.Errorf("interpreter pipes: %w", err)
	}
	args := pydriver.Args(python)
	cmd := &exec.Cmd{
		Path: python, Args: args, Dir: dir, Env: cfg.Env,
		Stdout: outW, Stderr: errW, ExtraFiles: []*os.File{reqR, ctlW},
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := startProcess(cmd); err != nil {
		closeAll(files...)
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "start python interpreter %s: %v", python, err)
	}
	closeAll(outW, errW, reqR, ctlW)
	in := &interp{id: id, log: log, pid: cmd.Process.Pid, reqW: reqW, limit: cfg.OutputLimit, ready: make(chan string, 1), exited: make(chan struct{})}
	var readers sync.WaitGroup
	readers.Add(3)
	go func() { defer readers.Done(); in.out.pump(outR, outlog.Stdout) }()
	go func() { defer readers.Done(); in.out.pump(errR, outlog.Stderr) }()
	go func() { defer readers.Done(); in.readControl(ctlR) }()
	go func() {
		_ = cmd.Wait()
		drainAfterExit(&readers, outR, errR, ctlR)
		closeAll(outR, errR, ctlR, reqW)
		in.status = exitCode(cmd.ProcessState)
		close(in.exited)
		log.Debug("interpreter exited", "context_id", id, "exit_code", in.status)
	}()

	if _, err := reqW.Write(pydriver.Preamble()); err != nil {
		in.kill()
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "python driver did not start: %v: %s", err, strings.TrimSpace(in.out.orphanTail()))
	}
	timer := time.NewTimer(driverStartTimeout)
	defer timer.Stop()
	select {
	case v := <-in.ready:
		log.Debug("interpreter ready", "context_id", id, "python", v)
		return in, nil
	case <-in.exited:
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "python driver exited with status %d before it was ready: %s", in.status, strings.TrimSpace(in.out.orphanTail()))
	case <-timer.C:
		in.kill()
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "python driver was not ready within %s: %s", driverStartTimeout, strings.TrimSpace(in.out.orphanTail()))
	}
}

// lookPath finds name as exec does, but against the PATH of env (the
// box's environment), not execd's own.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return exec.LookPath(name)
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", name, exec.ErrNotFound)
}

// readControl dispatches the driver's control messages until its pipe ends.
func (in *interp) readControl(f *os.File) {
	r := pydriver.NewReader(f)
	for {
		m, err := r.Next()
		if errors.Is(err, pydriver.ErrMalformed) {
			in.log.Warn("bad message from python driver", "context_id", in.id, "error", err)
			continue
		}
		if err != nil {
			return
		}
		in.mu.Lock()
		run := in.cur
		switch {
		case m.Type == pydriver.TypeReady:
			select {
			case in.ready <- m.Python:
			default:
			}
		case run == nil:
		case m.Type == pydriver.TypeStarted && !closed(run.started):
			run.count = m.N
			close(run.started)
		case m.Type == pydriver.TypeResult:
			run.results = append(run.results, m.Data)
		case m.Type == pydriver.TypeError:
			run.err = &wire.ExecError{Name: m.EName, Value: m.EValue, Traceback: m.Traceback}
		case m.Type == pydriver.TypeDone && !closed(run.ctlDone):
			for _, fd := range m.Marked {
				run.marked = append(run.marked, outlog.Stream(fd))
			}
			close(run.ctlDone)
		}
		in.mu.Unlock()
	}
}

// start begins running code as a cell and returns the run; rec.done closes
// once it finished. Errors: CONFLICT when a cell runs or the interpreter
// has ended.
func (in *interp) start(code string) (*codeRun, error) {
	if !in.busy.TryLock() {
		return nil, sandbox.Errorf(sandbox.CodeConflict, "context %s busy: another execution is in progress", in.id)
	}
	if closed(in.exited) {
		in.busy.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeConflict, "context %s has ended (its interpreter exited with status %d); create a new one", in.id, in.status)
	}
	marker := newMarker()
	line, err := pydriver.Request{Code: code, Marker: marker}.Encode()
	if err != nil {
		in.busy.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "%v", err)
	}
	rec := newRunRecord(in.id, code, in.limit)
	run := &codeRun{rec: rec, started: make(chan struct{}), ctlDone: make(chan struct{})}
	run.fr = in.out.begin(marker, rec.out)
	in.mu.Lock()
	in.cur = run
	in.mu.Unlock()
	if _, err := in.reqW.Write(line); err != nil {
		rec.live.Detach()
		in.out.end(run.fr)
		in.mu.Lock()
		in.cur = nil
		in.mu.Unlock()
		in.busy.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeConflict, "context %s does not accept input (its interpreter has ended): %v", in.id, err)
	}
	go in.await(run)
	return run, nil
}

// await finishes run once the driver reported it done and its markers were
// read, or the interpreter ended.
func (in *interp) await(run *codeRun) {
	select {
	case <-run.ctlDone:
	case <-in.exited:
	}
	if closed(run.ctlDone) {
		run.fr.waitMarked(run.marked, in.exited, markerIdle)
	}
	in.out.end(run.fr)
	code, msg := 0, ""
	if !closed(run.ctlDone) {
		code = in.status
		msg = fmt.Sprintf("the python interpreter exited with status %d; the context has ended", code)
		run.err = &wire.ExecError{Name: "InterpreterExited", Value: msg, Traceback: []string{msg}}
	}
	in.mu.Lock()
	in.cur = nil
	in.mu.Unlock()
	// Free the interpreter before completing the record, so that a client
	// that saw execution_complete can run its next cell at once.
	in.busy.Unlock()
	finishRun(run.rec, code, msg)
}

// interrupt sends SIGINT to the running cell's process group (the
// interpreter and the subprocesses in its group) once the cell has
// started, and waits, up to interruptWait, for the cell to end, repeating
// the SIGINT every interruptRepeat: a first one may only end a subprocess
// (os.system ignores SIGINT in the interpreter while it waits). Without a
// running cell it does nothing.
func (in *interp) interrupt() {
	in.mu.Lock()
	run := in.cur
	in.mu.Unlock()
	if run == nil {
		return
	}
	deadline := time.NewTimer(interruptWait)
	defer deadline.Stop()
	select {
	case <-run.started:
	case <-run.rec.done:
		return
	case <-deadline.C:
		return
	}
	repeat := time.NewTicker(interruptRepeat)
	defer repeat.Stop()
	for {
		in.mu.Lock()
		if in.cur == run {
			killGroup(in.pid, syscall.SIGINT)
		}
		in.mu.Unlock()
		select {
		case <-run.rec.done:
			return
		case <-deadline.C:
			return
		case <-repeat.C:
		}
	}
}

// kill ends the interpreter and its process group and waits for it.
func (in *interp) kill() {
	if closed(in.exited) {
		return
	}
	signalDescendants(in.pid, syscall.SIGKILL)
	killGroup(in.pid, syscall.SIGKILL)
	<-in.exited
}

// codeContext is one context: a python interpreter or a bash shell.
type codeContext struct {
	id       string
	language string
	created  time.Time
	py       *interp
	sh       *shell

	mu    sync.Mutex
	count int // bash execution count
}

func (cc *codeContext) wire() wire.CodeContext {
	return wire.CodeContext{ID: cc.id, Language: cc.language}
}

func (cc *codeContext) kill() {
	if cc.py != nil {
		cc.py.kill()
	} else {
		cc.sh.kill("context deleted")
	}
}

// contextTable owns the code contexts.
type contextTable struct {
	cfg    *Config
	log    *slog.Logger
	mu     sync.Mutex
	byID   map[string]*codeContext
	closed bool
}

// create starts a context of language (already normalised) in cwd.
// Errors: INVALID_PATH/FILE_NOT_FOUND for cwd, NOT_SUPPORTED without
// python, TOO_MANY_REQUESTS beyond MaxCommands contexts, UNAVAILABLE while
// shutting down, RUNTIME_ERROR when the interpreter fails to start.
func (t *contextTable) create(language, cwd string) (*codeContext, error) {
	dir, err := resolveDir(t.cfg.WorkDir, cwd)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	case len(t.byID) >= t.cfg.MaxCommands:
		t.mu.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeTooManyRequests, "too many code contexts (limit %d); delete some first", t.cfg.MaxCommands)
	}
	t.mu.Unlock()
	cc := &codeContext{id: newID("ctx"), language: language, created: time.Now()}
	if language == langPython {
		cc.py, err = startInterp(t.cfg, t.log, cc.id, dir)
	} else {
		cc.sh, err = startShell(t.cfg, t.log, cc.id, dir)
	}
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		go cc.kill()
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	}
	t.byID[cc.id] = cc
	t.log.Debug("code context created", "context_id", cc.id, "language", language)
	return cc, nil
}

// get returns context id, or a CONTEXT_NOT_FOUND error.
func (t *contextTable) get(id string) (*codeContext, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cc, ok := t.byID[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.CodeContextNotFound, "context %q not found", id)
	}
	return cc, nil
}

// list returns the contexts of language ("" = all), oldest first.
func (t *contextTable) list(language string) []*codeContext {
	t.mu.Lock()
	out := make([]*codeContext, 0, len(t.byID))
	for _, cc := range t.byID {
		if language == "" || cc.language == language {
			out = append(out, cc)
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].created.Before(out[j].created) })
	return out
}

// remove forgets context id and kills its process, or fails with
// CONTEXT_NOT_FOUND.
func (t *contextTable) remove(id string) error {
	t.mu.Lock()
	cc, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return sandbox.Errorf(sandbox.CodeContextNotFound, "context %q not found", id)
	}
	cc.kill()
	return nil
}

// removeAll kills the contexts of language ("" = all); with shutdown, new
// contexts are refused from then on.
func (t *contextTable) removeAll(language string, shutdown bool) {
	t.mu.Lock()
	t.closed = t.closed || shutdown
	var all []*codeContext
	for id, cc := range t.byID {
		if language == "" || cc.language == language {
			all = append(all, cc)
			delete(t.byID, id)
		}
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, cc := range all {
		wg.Add(1)
		go func() { defer wg.Done(); cc.kill() }()
	}
	wg.Wait()
}
