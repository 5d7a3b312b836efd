package execd

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/javadriver"
	"github.com/astrabox/astrabox/execd/nodedriver"
	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/pydriver"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// interp is an interpreter running a driver of the pydriver protocol: a
// python one (package pydriver) or node (package nodedriver).
type interp struct {
	id     string
	name   string // "python" or "node", for messages
	log    *slog.Logger
	pid    int
	reqW   *os.File
	cfg    *Config // for each run's output log
	out    framedOutput
	ready  chan pydriver.Message // receives the ready message once
	exited chan struct{}         // closed once reaped and all pipes drained
	status int                   // exit status; valid once exited is closed

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

// driverSpec is how to start the driver of a language.
type driverSpec struct {
	name     string // the interpreter, for messages: "python", "node", "java"
	args     []string
	preamble []byte // written first to the request pipe
	source   []byte // when set, handed over as an unlinked file on fd javadriver.SourceFD
}

// driverFor returns how to start the driver for language (not bash or go),
// with the interpreter resolved against the box's PATH. A missing
// interpreter is NOT_SUPPORTED, naming the languages the box offers.
func driverFor(cfg *Config, language string) (driverSpec, error) {
	if language == langJava {
		java, err := jdkLauncher(cfg)
		if err != nil {
			return driverSpec{}, sandbox.Errorf(sandbox.CodeNotSupported, "java code contexts need a JDK: %v; this box offers: %s",
				err, strings.Join(offeredLanguages(cfg), ", "))
		}
		return driverSpec{name: "java", args: javadriver.Args(java), source: javadriver.Source()}, nil
	}
	name, bin := "python", cfg.Python
	if language != langPython {
		name, bin = "node", cfg.Node
	}
	path, err := lookPath(bin, cfg.Env)
	if err != nil {
		return driverSpec{}, sandbox.Errorf(sandbox.CodeNotSupported,
			"%s code contexts need the %s interpreter %q, which is not in the box (%v); this box offers: %s",
			language, name, bin, err, strings.Join(offeredLanguages(cfg), ", "))
	}
	if language == langPython {
		return driverSpec{name: name, args: pydriver.Args(path), preamble: pydriver.Preamble()}, nil
	}
	return driverSpec{name: name, args: nodedriver.Args(path, language), preamble: nodedriver.Preamble()}, nil
}

// jdkLauncher returns the java launcher of java contexts: cfg.Java on the
// box's PATH, which must be a JDK's (jshell beside it, once links are
// resolved), not a bare JRE's.
func jdkLauncher(cfg *Config) (string, error) {
	java, err := lookPath(cfg.Java, cfg.Env)
	if err != nil {
		return "", fmt.Errorf("the java launcher %q is not in the box (%w)", cfg.Java, err)
	}
	real, err := filepath.EvalSymlinks(java)
	if err != nil {
		return "", fmt.Errorf("resolve %s: %w", java, err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(real), "jshell")); err != nil {
		return "", fmt.Errorf("%s is not a JDK's launcher (no jshell beside it)", real)
	}
	return real, nil
}

// sourceFile returns an open file holding src, already unlinked: a
// launcher that opens its source by name and seeks in it (java) reads it
// as /proc/self/fd/N, and it is gone with the last descriptor.
func sourceFile(src []byte) (*os.File, error) {
	f, err := os.CreateTemp("", "astrabox-driver-*")
	if err != nil {
		return nil, fmt.Errorf("driver source: %w", err)
	}
	_ = os.Remove(f.Name())
	if _, err := f.Write(src); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("driver source: %w", err)
	}
	return f, nil
}

// startInterp starts the interpreter of language in dir and waits until
// its driver is ready. A missing interpreter, or one too old for the
// language, is NOT_SUPPORTED.
func startInterp(cfg *Config, log *slog.Logger, id, dir, language string) (*interp, error) {
	spec, err := driverFor(cfg, language)
	if err != nil {
		return nil, err
	}
	name, args := spec.name, spec.args
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
	extra := []*os.File{reqR, ctlW}
	if spec.source != nil && err == nil {
		var src *os.File
		if src, err = sourceFile(spec.source); err == nil {
			files = append(files, src)
			extra = append(extra, src) // fd 5: javadriver.SourceFD
		}
	}
	if err != nil {
		closeAll(files...)
		return nil, fmt.Errorf("interpreter pipes: %w", err)
	}
	cmd := &exec.Cmd{
		Path: args[0], Args: args, Dir: dir, Env: cfg.Env,
		Stdout: outW, Stderr: errW, ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := startProcess(cmd); err != nil {
		closeAll(files...)
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "start %s interpreter %s: %v", name, args[0], err)
	}
	closeAll(outW, errW, reqR, ctlW)
	closeAll(extra[2:]...)
	in := &interp{id: id, name: name, log: log, pid: cmd.Process.Pid, reqW: reqW, cfg: cfg, ready: make(chan pydriver.Message, 1), exited: make(chan struct{})}
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

	if _, err := reqW.Write(spec.preamble); err != nil {
		in.kill()
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "%s driver did not start: %v: %s", name, err, strings.TrimSpace(in.out.orphanTail()))
	}
	timer := time.NewTimer(driverStartTimeout)
	defer timer.Stop()
	select {
	case m := <-in.ready:
		if m.Unsupported != "" {
			in.kill()
			return nil, sandbox.Errorf(sandbox.CodeNotSupported, "%s; this box offers: %s", m.Unsupported,
				strings.Join(slices.DeleteFunc(offeredLanguages(cfg), func(l string) bool { return l == language }), ", "))
		}
		log.Debug("interpreter ready", "context_id", id, "language", language, "version", m.Python)
		return in, nil
	case <-in.exited:
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "%s driver exited with status %d before it was ready: %s", name, in.status, strings.TrimSpace(in.out.orphanTail()))
	case <-timer.C:
		in.kill()
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "%s driver was not ready within %s: %s", name, driverStartTimeout, strings.TrimSpace(in.out.orphanTail()))
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
			in.log.Warn("bad message from a code context driver", "context_id", in.id, "interpreter", in.name, "error", err)
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
			case in.ready <- m:
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
	rec := newRunRecord(in.id, code, in.cfg)
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
		msg = fmt.Sprintf("the %s interpreter exited with status %d; the context has ended", in.name, code)
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
