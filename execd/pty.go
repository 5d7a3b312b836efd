package execd

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// PTY sessions (POST /pty, /pty/{id}/ws): a shell, or a given command, in a
// terminal or with plain pipes, that outlives any one WebSocket client.
//
// The process starts on the first attach, in the mode that attach asks for.
// From then on its output is read continuously, whether a client is attached
// or not, into a bounded offset-addressed log (the replay buffer) from which
// every attach replays and then follows. The process is the leader of a new
// terminal session; deleting the PTY session, closing the server, or the
// leader's own exit kills every process left in that terminal session.

const (
	ptyDefaultCols = 80
	ptyDefaultRows = 24
	ptyTerm        = "xterm-256color"
)

// ptyTable owns every PTY session of a Server.
type ptyTable struct {
	cfg    *Config
	log    *slog.Logger
	mu     sync.Mutex
	byID   map[string]*ptySession
	closed bool
}

func newPTYTable(cfg *Config, log *slog.Logger) *ptyTable {
	return &ptyTable{cfg: cfg, log: log, byID: make(map[string]*ptySession)}
}

// ptySession is one PTY session and, once started, its process.
type ptySession struct {
	id      string
	shell   string
	command string
	dir     string
	baseEnv []string
	envs    map[string]string
	log     *slog.Logger
	out     *outlog.Log   // the replay buffer
	done    chan struct{} // closed when the process is reaped and out is complete, or when deleted unstarted
	onExit  func(*ptySession)

	mu      sync.Mutex
	started bool
	pipe    bool
	deleted bool
	pid     int      // the session leader; valid for signals while !reaped
	reaped  bool     // the leader was reaped: pid may name another process now
	stdin   *os.File // PTY master or stdin pipe; nil once the process ended
	master  *os.File // PTY mode only; nil once the process ended
	exit    *int
	holder  *ptyHolder
}

// ptyHolder is the attach that currently owns a session's input.
type ptyHolder struct {
	evicted chan struct{} // closed when another attach takes the session over
}

// create validates req and registers a session; its process is not started.
// Errors carry CodeInvalidRequest, CodeInvalidPath, CodeTooManyRequests or
// CodeUnavailable.
func (t *ptyTable) create(req wire.CreatePTYRequest) (*ptySession, error) {
	if strings.IndexByte(req.Command, 0) >= 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "command contains a NUL byte")
	}
	dir, err := resolveDir(t.cfg.WorkDir, req.Cwd)
	if err != nil {
		return nil, err
	}
	if _, err := mergeEnv(nil, req.Envs); err != nil {
		return nil, err
	}
	p := &ptySession{
		id:      newID("pty"),
		shell:   t.cfg.Shell,
		command: req.Command,
		dir:     dir,
		baseEnv: t.cfg.Env,
		envs:    req.Envs,
		log:     t.log,
		out:     outlog.New(t.cfg.PTYReplayBytes),
		done:    make(chan struct{}),
		onExit:  t.retain,
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	}
	if len(t.byID) >= t.cfg.MaxCommands {
		return nil, sandbox.Errorf(sandbox.CodeTooManyRequests, "too many pty sessions (limit %d)", t.cfg.MaxCommands)
	}
	t.byID[p.id] = p
	return p, nil
}

// get returns the session with id, or a CodeSessionNotFound error.
func (t *ptyTable) get(id string) (*ptySession, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.byID[id]
	if !ok {
		return nil, ptyNotFound(id)
	}
	return p, nil
}

func ptyNotFound(id string) error {
	return sandbox.Errorf(sandbox.CodeSessionNotFound, "pty session %q not found (unknown, deleted, or expired)", id)
}

// remove unregisters the session with id, kills its processes and waits
// until they are gone.
func (t *ptyTable) remove(id string) error {
	t.mu.Lock()
	p, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return ptyNotFound(id)
	}
	p.terminate()
	t.log.Debug("pty session deleted", "session_id", id)
	return nil
}

// retain frees an exited session's record after the retention period.
func (t *ptyTable) retain(p *ptySession) {
	time.AfterFunc(t.cfg.Retention, func() {
		t.mu.Lock()
		if t.byID[p.id] == p {
			delete(t.byID, p.id)
		}
		t.mu.Unlock()
	})
}

// closeAll refuses new sessions, kills every session's processes and waits
// for them.
func (t *ptyTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	all := make([]*ptySession, 0, len(t.byID))
	for id, p := range t.byID {
		all = append(all, p)
		delete(t.byID, id)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(p.terminate)
	}
	wg.Wait()
}

// terminate marks the session deleted, kills its processes and waits until
// the process is reaped and its output complete. Attached clients see the
// exit frame. It is idempotent.
func (p *ptySession) terminate() {
	p.mu.Lock()
	first := !p.deleted
	p.deleted = true
	started := p.started
	if started && !p.reaped {
		ptyKillSession(p.pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	if first && !started {
		p.out.Close()
		close(p.done)
	}
	<-p.done
}

// attach makes h the holder of the session's input. With takeover a
// current holder is evicted; without, a held session is a CodeConflict
// error. A deleted session is CodeSessionNotFound.
func (p *ptySession) attach(h *ptyHolder, takeover bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return ptyNotFound(p.id)
	}
	if p.holder != nil {
		if !takeover {
			return sandbox.Errorf(sandbox.CodeConflict, "another client is attached to pty session %s; attach with takeover=1 to take it over", p.id)
		}
		close(p.holder.evicted)
	}
	p.holder = h
	return nil
}

// detach releases h if it still holds the session.
func (p *ptySession) detach(h *ptyHolder) {
	p.mu.Lock()
	if p.holder == h {
		p.holder = nil
	}
	p.mu.Unlock()
}

// holds reports whether h is the session's current holder.
func (p *ptySession) holds(h *ptyHolder) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.holder == h
}

// start starts the process unless it was started already (the mode of the
// first start stays). cols and rows (0 = default) size the terminal.
func (p *ptySession) start(pipe bool, cols, rows uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.deleted {
		return ptyNotFound(p.id)
	}
	if p.started {
		return nil
	}
	extra := map[string]string{}
	if !pipe {
		extra["TERM"] = ptyTerm
	}
	env, err := mergeEnv(p.baseEnv, extra)
	if err == nil {
		env, err = mergeEnv(env, p.envs)
	}
	if err != nil {
		return err
	}
	args := []string{p.shell}
	if p.command != "" {
		args = append(args, "-c", p.command)
	}
	cmd := &exec.Cmd{Path: p.shell, Args: args, Dir: p.dir, Env: env}
	var outs []*os.File
	if pipe {
		outs, err = p.startPipe(cmd)
	} else {
		outs, err = p.startPTY(cmd, cols, rows)
	}
	if err != nil {
		return sandbox.Errorf(sandbox.CodeRuntime, "start pty session %s: %v", p.id, err)
	}
	p.started, p.pipe, p.pid = true, pipe, cmd.Process.Pid
	go p.run(cmd, outs)
	p.log.Debug("pty session started", "session_id", p.id, "pid", p.pid, "pipe", pipe)
	return nil
}

// startPTY starts cmd as the leader of a new session whose controlling
// terminal is a fresh PTY, and returns the master to read output from.
func (p *ptySession) startPTY(cmd *exec.Cmd, cols, rows uint16) ([]*os.File, error) {
	m, tty, err := pty.Open()
	if err != nil {
		return nil, fmt.Errorf("open pty: %w", err)
	}
	defer tty.Close() // the child has its own copy
	master, err := ptyPollable(m)
	if err != nil {
		return nil, fmt.Errorf("pty master: %w", err)
	}
	if cols == 0 || rows == 0 {
		cols, rows = ptyDefaultCols, ptyDefaultRows
	}
	if err := pty.Setsize(tty, &pty.Winsize{Cols: cols, Rows: rows}); err != nil {
		master.Close()
		return nil, fmt.Errorf("set terminal size: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := startProcess(cmd); err != nil {
		master.Close()
		return nil, err
	}
	p.master, p.stdin = master, master
	return []*os.File{master}, nil
}

// startPipe starts cmd as the leader of a new session with stdin, stdout
// and stderr pipes, and returns the stdout and stderr read ends.
func (p *ptySession) startPipe(cmd *exec.Cmd) ([]*os.File, error) {
	var fds [6]*os.File // inR, inW, outR, outW, errR, errW
	for i := 0; i < 6; i += 2 {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(fds[:i]...)
			return nil, fmt.Errorf("pipe: %w", err)
		}
		fds[i], fds[i+1] = r, w
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = fds[0], fds[3], fds[5]
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := startProcess(cmd); err != nil {
		closeAll(fds[:]...)
		return nil, err
	}
	closeAll(fds[0], fds[3], fds[5])
	p.stdin = fds[1]
	return []*os.File{fds[2], fds[4]}, nil
}

// run reads the process's output into the log until it exits, kills what
// is left of its terminal session, reaps it and completes the log.
func (p *ptySession) run(cmd *exec.Cmd, outs []*os.File) {
	var pumps sync.WaitGroup
	for i, f := range outs {
		s := outlog.Stdout
		if i == 1 {
			s = outlog.Stderr
		}
		pumps.Go(func() { ptyPump(f, p.out, s) })
	}
	// Wait for the exit without reaping, so that the session id cannot be
	// reused while the processes left in the session are killed.
	if err := ptyWaitNoReap(cmd.Process.Pid); err != nil {
		p.log.Warn("pty session wait", "session_id", p.id, "err", err)
	}
	p.mu.Lock()
	ptyKillSession(cmd.Process.Pid, syscall.SIGKILL)
	p.reaped = true
	p.mu.Unlock()
	_ = cmd.Wait()
	deadline := time.Now().Add(pipeDrainGrace)
	for _, f := range outs {
		_ = f.SetReadDeadline(deadline)
	}
	pumps.Wait()
	code := exitCode(cmd.ProcessState)
	p.mu.Lock()
	p.exit = &code
	stdin := p.stdin
	p.stdin, p.master = nil, nil
	p.mu.Unlock()
	closeAll(outs...)
	if stdin != outs[0] {
		closeAll(stdin)
	}
	p.out.Close()
	close(p.done)
	p.log.Debug("pty session exited", "session_id", p.id, "exit_code", code)
	if p.onExit != nil {
		p.onExit(p)
	}
}

// ptyPump copies r into log as stream s until EOF, error or read deadline.
func ptyPump(r *os.File, log *outlog.Log, s outlog.Stream) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			log.Write(s, buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// writeStdin writes b to the process's input. It may block while the
// terminal's input buffer is full; it fails once the process has ended.
func (p *ptySession) writeStdin(b []byte) error {
	p.mu.Lock()
	w := p.stdin
	p.mu.Unlock()
	if w == nil {
		return sandbox.Errorf(sandbox.CodeConflict, "pty session %s is not running", p.id)
	}
	if _, err := w.Write(b); err != nil {
		return sandbox.Errorf(sandbox.CodeRuntime, "write stdin: %v", err)
	}
	return nil
}

// signal sends sig to the terminal's foreground process group (the job
// the user is running) in PTY mode, and to the process group of the session
// leader in pipe mode. A session that is not running is left alone.
func (p *ptySession) signal(sig syscall.Signal) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started || p.reaped {
		return
	}
	target := p.pid
	if p.master != nil {
		if pg, err := ptyForeground(p.master); err == nil && pg > 0 {
			target = pg
		}
	}
	killGroup(target, sig)
}

// resize sets the terminal size; it is a no-op in pipe mode or once the
// process has ended.
func (p *ptySession) resize(cols, rows uint16) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.master == nil {
		return nil
	}
	return ptySetWinsize(p.master, cols, rows)
}

func (p *ptySession) status() wire.PTYStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := wire.PTYStatus{
		SessionID:    p.id,
		Running:      p.started && p.exit == nil,
		Attached:     p.holder != nil,
		OutputOffset: p.out.End(),
	}
	if p.exit != nil {
		code := *p.exit
		st.ExitCode = &code
	}
	return st
}

func (p *ptySession) mode() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pipe {
		return wire.PTYModePipe
	}
	return wire.PTYModePTY
}

func (p *ptySession) exitStatus() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exit == nil {
		return -1
	}
	return *p.exit
}
