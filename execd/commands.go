package execd

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// pipeDrainGrace is how long output pipes are still read to their end after
// a command's process exits: after it, whatever the pipes hold is drained
// into the command's log, which is closed, so that a daemon the command
// left behind, holding the pipes open, does not keep the command running;
// what the daemon writes later is read and discarded (drainUntilClosed).
const pipeDrainGrace = 100 * time.Millisecond

// newID returns a random identifier with the given prefix.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// commandTable owns every command execd started, running or retained.
type commandTable struct {
	cfg     *Config
	log     *slog.Logger
	mu      sync.Mutex
	byID    map[string]*command
	running int
	closed  bool
}

// newCommandTable returns the table of the commands started with cfg. It
// completes cfg.Env, the base environment that commands, sessions, code
// contexts and terminals all start from, with wire.EnvAstraboxBin, resolved
// here once (see withAstraboxBin); a request's own variables are applied
// on top of it.
func newCommandTable(cfg *Config, log *slog.Logger) *commandTable {
	cfg.Env = withAstraboxBin(cfg.Env)
	return &commandTable{cfg: cfg, log: log, byID: make(map[string]*command)}
}

// command is one process started by POST /command, with its output log.
type command struct {
	id         string
	content    string
	background bool
	startedAt  time.Time
	out        *outlog.Log
	pid        int
	done       chan struct{} // closed when the process exited and output is complete

	// live is the Follower held for the request of a foreground command
	// from before its process starts, so that no output is dropped before
	// the request streams it; the request detaches it.
	live *outlog.Follower

	stdinMu sync.Mutex
	stdin   *os.File // nil unless started with Stdin

	mu         sync.Mutex
	exit       *int
	errMsg     string
	finishedAt time.Time
	killReason string
}

// get returns the command with id, or a CodeCommandNotFound error.
func (t *commandTable) get(id string) (*command, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c, ok := t.byID[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.CodeCommandNotFound, "command %q not found (unknown, or its record has expired)", id)
	}
	return c, nil
}

// reserve takes a running slot, or fails with CodeTooManyRequests.
func (t *commandTable) reserve() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	}
	if t.running >= t.cfg.MaxCommands {
		return sandbox.Errorf(sandbox.CodeTooManyRequests, "too many concurrent commands (limit %d)", t.cfg.MaxCommands)
	}
	t.running++
	return nil
}

func (t *commandTable) release() {
	t.mu.Lock()
	t.running--
	t.mu.Unlock()
}

// start validates req and starts its process. The returned command is
// registered and its output is being collected.
func (t *commandTable) start(req wire.RunCommandRequest) (*command, error) {
	if strings.TrimSpace(req.Command) == "" {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "command is required")
	}
	if strings.IndexByte(req.Command, 0) >= 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "command contains a NUL byte")
	}
	if req.Timeout < 0 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "timeout must not be negative")
	}
	dir, err := resolveDir(t.cfg.WorkDir, req.Cwd)
	if err != nil {
		return nil, err
	}
	env, err := mergeEnv(t.cfg.Env, req.Envs)
	if err != nil {
		return nil, err
	}
	cred, err := credential(req.UID, req.GID)
	if err != nil {
		return nil, err
	}
	if err := t.reserve(); err != nil {
		return nil, err
	}
	c, err := t.spawn(req, dir, env, cred)
	if err != nil {
		t.release()
		return nil, err
	}
	return c, nil
}

func (t *commandTable) spawn(req wire.RunCommandRequest, dir string, env []string, cred *syscall.Credential) (*command, error) {
	outR, outW, err := stdioPair(req.PrivateStdio, false)
	if err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := stdioPair(req.PrivateStdio, false)
	if err != nil {
		closeAll(outR, outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:        t.cfg.Shell,
		Args:        []string{t.cfg.Shell, "-c", req.Command},
		Dir:         dir,
		Env:         env,
		Stdout:      outW,
		Stderr:      errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true, Credential: cred},
	}
	var inR, inW *os.File
	if req.Stdin {
		if inR, inW, err = stdioPair(req.PrivateStdio, true); err != nil {
			closeAll(outR, outW, errR, errW)
			return nil, fmt.Errorf("stdin pipe: %w", err)
		}
		cmd.Stdin = inR
	}
	out := t.cfg.newOutput()
	var live *outlog.Follower
	if !req.Background {
		live = out.Follow(0)
	}
	if err := startProcess(cmd); err != nil {
		closeAll(outR, outW, errR, errW, inR, inW)
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "start command: %v", err)
	}
	closeAll(outW, errW, inR)

	c := &command{
		id:         newID("cmd"),
		content:    req.Command,
		background: req.Background,
		startedAt:  time.Now(),
		out:        out,
		live:       live,
		pid:        cmd.Process.Pid,
		done:       make(chan struct{}),
		stdin:      inW,
	}
	t.mu.Lock()
	t.byID[c.id] = c
	t.mu.Unlock()

	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); pump(outR, c.out, outlog.Stdout) }()
	go func() { defer pumps.Done(); pump(errR, c.out, outlog.Stderr) }()

	var timer *time.Timer
	if req.Timeout > 0 {
		limit := time.Duration(req.Timeout) * time.Millisecond
		timer = time.AfterFunc(limit, func() {
			c.kill(fmt.Sprintf("timed out after %s", limit), syscall.SIGKILL)
		})
	}
	go func() {
		werr := cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		pumped := make(chan struct{})
		go func() { pumps.Wait(); close(pumped) }()
		select {
		case <-pumped:
		case <-time.After(pipeDrainGrace):
			_ = outR.SetReadDeadline(time.Now())
			_ = errR.SetReadDeadline(time.Now())
			<-pumped
		}
		// A process the command left running (a server started with
		// `&`) may still hold the pipes: they are drained until it closes
		// them, never closed under it (it would get EPIPE on its next
		// log line and, by SIGPIPE's default, die).
		go drainUntilClosed(outR)
		go drainUntilClosed(errR)
		// The slot is free before anyone waiting on done is woken.
		t.release()
		c.finish(cmd.ProcessState, werr)
		t.log.Debug("command finished", "command_id", c.id, "exit_code", *c.exit)
		time.AfterFunc(t.cfg.Retention, func() { t.forget(c.id) })
	}()
	return c, nil
}

func (t *commandTable) forget(id string) {
	t.mu.Lock()
	c := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if c != nil {
		t.cfg.output.Forget(c.out)
	}
}

// closeAll kills every running command and waits for them.
func (t *commandTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	cmds := make([]*command, 0, len(t.byID))
	for _, c := range t.byID {
		cmds = append(cmds, c)
	}
	t.mu.Unlock()
	for _, c := range cmds {
		c.kill("execd is shutting down", syscall.SIGKILL)
	}
	for _, c := range cmds {
		<-c.done
	}
}

// pump copies r into log until EOF or error. When r's read deadline
// passes, it still copies whatever r holds at that moment, then returns.
func pump(r *os.File, log *outlog.Log, s outlog.Stream) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			log.Write(s, buf[:n])
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			drainAvailable(r, buf, log, s)
			return
		}
		if err != nil {
			return
		}
	}
}

// drainAvailable copies what r holds now without waiting for more.
func drainAvailable(r *os.File, buf []byte, log *outlog.Log, s outlog.Stream) {
	// RawConn.Read refuses to run past an expired deadline.
	_ = r.SetReadDeadline(time.Time{})
	rc, err := r.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		for {
			n, err := syscall.Read(int(fd), buf)
			if n <= 0 || err != nil {
				return true
			}
			log.Write(s, buf[:n])
		}
	})
}

// drainUntilClosed reads r and discards what it reads until every writer
// has closed it, then closes it: the command's record is finished and its
// log closed, so what a process it left behind writes later is not kept.
func drainUntilClosed(r *os.File) {
	_ = r.SetReadDeadline(time.Time{})
	_, _ = io.Copy(io.Discard, r)
	_ = r.Close()
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		if f != nil {
			_ = f.Close()
		}
	}
}

func (c *command) finish(ps *os.ProcessState, werr error) {
	code := exitCode(ps)
	c.mu.Lock()
	c.exit = &code
	c.finishedAt = time.Now()
	switch {
	case c.killReason != "":
		c.errMsg = c.killReason
	case werr != nil:
		c.errMsg = werr.Error()
	}
	c.mu.Unlock()
	c.stdinMu.Lock()
	if c.stdin != nil {
		_ = c.stdin.Close()
		c.stdin = nil
	}
	c.stdinMu.Unlock()
	c.out.Close()
	close(c.done)
}

func (c *command) running() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// kill records why the command is being stopped (the first reason wins)
// and sends sig to its whole process group.
func (c *command) kill(reason string, sig syscall.Signal) {
	if !c.running() {
		return
	}
	c.mu.Lock()
	if c.killReason == "" {
		c.killReason = reason
	}
	c.mu.Unlock()
	killGroup(c.pid, sig)
}

// terminate sends SIGTERM to the process group, then SIGKILL after grace,
// and waits until the command has finished.
func (c *command) terminate(reason string, grace time.Duration) {
	c.kill(reason, syscall.SIGTERM)
	select {
	case <-c.done:
		return
	case <-time.After(grace):
	}
	c.kill(reason, syscall.SIGKILL)
	<-c.done
}

// signal sends sig to the command's process group.
func (c *command) signal(sig syscall.Signal) error {
	if !c.running() {
		return sandbox.Errorf(sandbox.CodeConflict, "command %s has already finished", c.id)
	}
	killGroup(c.pid, sig)
	return nil
}

// writeStdin copies r to the command's stdin and closes it when closeAfter.
func (c *command) writeStdin(r io.Reader, closeAfter bool) (int64, error) {
	c.stdinMu.Lock()
	defer c.stdinMu.Unlock()
	if c.stdin == nil {
		if c.running() {
			return 0, sandbox.Errorf(sandbox.CodeConflict, "command %s has no stdin (start it with \"stdin\": true) or stdin was closed", c.id)
		}
		return 0, sandbox.Errorf(sandbox.CodeConflict, "command %s has already finished", c.id)
	}
	n, err := io.Copy(c.stdin, r)
	if err != nil && !errors.Is(err, syscall.EPIPE) {
		return n, sandbox.Errorf(sandbox.CodeRuntime, "write stdin: %v", err)
	}
	if closeAfter || err != nil {
		_ = c.stdin.Close()
		c.stdin = nil
	}
	return n, nil
}

func (c *command) status() wire.CommandStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := wire.CommandStatus{
		ID:            c.id,
		Content:       c.content,
		Running:       c.exit == nil,
		ExitCode:      c.exit,
		Error:         c.errMsg,
		StartedAt:     c.startedAt.UTC(),
		Background:    c.background,
		OutputBytes:   c.out.End(),
		OutputDropped: c.out.Dropped(),
	}
	if c.exit != nil {
		t := c.finishedAt.UTC()
		st.FinishedAt = &t
	}
	return st
}

// stdioPair returns the read and write ends of one of a command's
// standard streams (the command gets the read end when childReads): a
// pipe, or with private a pair no other process can open again
// (privatePair).
func stdioPair(private, childReads bool) (r, w *os.File, err error) {
	if private {
		return privatePair(childReads)
	}
	return os.Pipe()
}
