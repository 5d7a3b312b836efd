package execd

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/execd/outlog"
	"github.com/astrabox/astrabox/sandbox"
)

// Bash sessions (POST /session, /session/{id}/run, DELETE /session/{id}).
//
// A session is one shell process, started with a pipe as stdin and read
// from as a script, so cwd, variables and functions persist from run to
// run. Each run is written to the shell as one compound command:
//
//	{ eval '<command>'
//	} </dev/null 3>&1 >&3 3>&- 4>&2 2>&4 4>&-; __astrabox_end '<marker half>' '<marker half>' "$?"
//
// The user's command reads /dev/null (it cannot consume the protocol), and
// the group's redirections make the shell restore its own stdout and stderr
// afterwards even if the command ran `exec >file`. __astrabox_end prints the
// run's marker and exit code to both streams, and returns that code so that
// $? at the next run is the command's. The marker is passed in two halves,
// so that not even `set -x` output contains it.
//
// Runs are serialised: a run while another is in progress is refused with
// CONFLICT ("session busy") rather than queued, so that a client never
// waits unknowingly behind a long command. A run whose client goes away is
// interrupted, as OpenSandbox does, since nothing else could stop it.
//
// A timeout (or an interrupt of a bash code context, or the client going
// away) kills the run's processes, found by walking /proc from the shell,
// while the shell lives on. The shell then carries on with the rest of the
// run, so the processes the run starts after that are killed as they
// appear, until the run ends; it ends with an error event and a non-zero
// exit code (128+signal if the shell reported 0).
//
// Caveats: `exit` (or a failure under `set -e`) ends the shell and so the
// session; later runs get CONFLICT. A run that only loops in shell builtins
// has no child to kill: when a stopped run has not ended after stopGrace,
// the shell is killed and the session ends.

// A stopped run (timeout, interrupt, client gone) first gets
// stopFirstGrace to end after its processes were signalled, then its new
// processes are killed every stopPoll for up to stopGrace.
const (
	stopFirstGrace = 100 * time.Millisecond
	stopPoll       = 20 * time.Millisecond
	stopGrace      = 2 * time.Second
)

// shellEndFunc is (re)defined before every run; the user cannot break the
// protocol by redefining printf or cd, and redefining __astrabox_end lasts
// only until the next run.
const shellEndFunc = `__astrabox_end() { if [ -n "${4+x}" ]; then CDPATH= command cd -- "$4"; OLDPWD=$5; unset __astrabox_dir __astrabox_old; fi; command printf '%s%s %d\n' "$1" "$2" "$3"; command printf '%s%s %d\n' "$1" "$2" "$3" >&2; return "$3"; }`

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellScript is the text written to a session's shell for one run.
func shellScript(command, cwd, marker string) string {
	half := len(marker) / 2
	a, b := shellQuote(marker[:half]), shellQuote(marker[half:])
	var sb strings.Builder
	sb.WriteString(shellEndFunc)
	sb.WriteString("; ")
	if cwd != "" {
		sb.WriteString(`__astrabox_dir=$PWD __astrabox_old=$OLDPWD; { CDPATH= command cd -- ` + shellQuote(cwd) + " && ")
	} else {
		sb.WriteString("{ ")
	}
	sb.WriteString("eval " + shellQuote(command) + "\n} </dev/null 3>&1 >&3 3>&- 4>&2 2>&4 4>&-; __astrabox_end " + a + " " + b + ` "$?"`)
	if cwd != "" {
		sb.WriteString(` "$__astrabox_dir" "$__astrabox_old"`)
	}
	sb.WriteString("\n")
	return sb.String()
}

// newMarker returns a fresh, unguessable run marker.
func newMarker() string { return "__" + newID("astrabox") + "__" }

// shell is a persistent shell process that serves runs one at a time.
type shell struct {
	id     string
	cfg    *Config
	log    *slog.Logger
	pid    int
	stdin  *os.File
	out    framedOutput
	exited chan struct{} // closed once the shell was reaped and its pipes drained
	status int           // the shell's exit status; valid once exited is closed

	busy    sync.Mutex // held for the whole of a run
	mu      sync.Mutex
	cur     *command       // the run in progress
	stopSig syscall.Signal // the signal that stopped cur, if it was stopped
}

// startShell starts a shell for id in dir (already resolved).
func startShell(cfg *Config, log *slog.Logger, id, dir string) (*shell, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("stdin pipe: %w", err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	args := []string{cfg.Shell}
	if strings.Contains(filepath.Base(cfg.Shell), "bash") {
		args = append(args, "--noprofile", "--norc")
	}
	cmd := &exec.Cmd{
		Path: cfg.Shell, Args: args, Dir: dir, Env: cfg.Env,
		Stdin: inR, Stdout: outW, Stderr: errW,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := startProcess(cmd); err != nil {
		closeAll(inR, inW, outR, outW, errR, errW)
		return nil, sandbox.Errorf(sandbox.CodeRuntime, "start shell %s: %v", cfg.Shell, err)
	}
	closeAll(inR, outW, errW)
	sh := &shell{id: id, cfg: cfg, log: log, pid: cmd.Process.Pid, stdin: inW, exited: make(chan struct{})}
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() { defer pumps.Done(); sh.out.pump(outR, outlog.Stdout) }()
	go func() { defer pumps.Done(); sh.out.pump(errR, outlog.Stderr) }()
	go func() {
		_ = cmd.Wait()
		drainAfterExit(&pumps, outR, errR)
		closeAll(outR, errR, inW)
		sh.status = exitCode(cmd.ProcessState)
		close(sh.exited)
		log.Debug("shell exited", "session_id", id, "exit_code", sh.status)
	}()
	return sh, nil
}

// start begins a run of command (cwd, if set, for this run only; timeout
// 0 = none) and returns its record: output goes to its out log, and done
// closes once the run finished. The record's id is the shell's. Errors:
// CONFLICT when a run is in progress or the shell has ended.
func (sh *shell) start(cmdline, cwd string, timeout time.Duration) (*command, error) {
	if !sh.busy.TryLock() {
		return nil, sandbox.Errorf(sandbox.CodeConflict, "session %s busy: another run is in progress", sh.id)
	}
	if closed(sh.exited) {
		sh.busy.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeConflict, "session %s has ended (its shell exited with status %d); create a new one", sh.id, sh.status)
	}
	c := newRunRecord(sh.id, cmdline, sh.cfg)
	marker := newMarker()
	fr := sh.out.begin(marker, c.out)
	sh.mu.Lock()
	sh.cur, sh.stopSig = c, 0
	sh.mu.Unlock()
	if _, err := io.WriteString(sh.stdin, shellScript(cmdline, cwd, marker)); err != nil {
		c.live.Detach()
		sh.out.end(fr)
		sh.mu.Lock()
		sh.cur = nil
		sh.mu.Unlock()
		sh.busy.Unlock()
		return nil, sandbox.Errorf(sandbox.CodeConflict, "session %s does not accept input (its shell has ended): %v", sh.id, err)
	}
	var timer *time.Timer
	if timeout > 0 {
		timer = time.AfterFunc(timeout, func() { sh.stop(c, fmt.Sprintf("timed out after %s", timeout), syscall.SIGKILL) })
	}
	go sh.await(c, fr, timer)
	return c, nil
}

// await finishes run c once its markers were read or the shell ended.
func (sh *shell) await(c *command, fr *framedRun, timer *time.Timer) {
	ok := fr.waitMarked([]outlog.Stream{outlog.Stdout, outlog.Stderr}, sh.exited, 0)
	if timer != nil {
		timer.Stop()
	}
	trailer := sh.out.end(fr)
	code, msg := -1, ""
	if ok {
		if n, err := strconv.Atoi(strings.TrimSpace(trailer)); err == nil {
			code = n
		}
	} else {
		code = sh.status
		msg = fmt.Sprintf("the shell exited with status %d; the session has ended", code)
	}
	sh.mu.Lock()
	if sh.stopSig != 0 && code == 0 {
		// The shell went on after the stopped command and ended the run
		// with a builtin; the run as a whole did not succeed.
		code = 128 + int(sh.stopSig)
	}
	sh.cur = nil
	sh.mu.Unlock()
	// Free the shell before completing the record, so that a client that
	// saw execution_complete can run its next command at once.
	sh.busy.Unlock()
	finishRun(c, code, msg)
}

// newRunRecord returns the record of a run that has no process of its
// own (a session run or a cell), with a Follower attached from the start
// for the request that streams it; see command.live.
func newRunRecord(id, content string, cfg *Config) *command {
	out := cfg.newOutput()
	return &command{id: id, content: content, startedAt: time.Now(), out: out, live: out.Follow(0), done: make(chan struct{})}
}

// finishRun completes a run record that has no process of its own: it
// records code (and msg unless a kill reason was recorded), closes the
// output and closes done.
func finishRun(c *command, code int, msg string) {
	c.mu.Lock()
	c.exit = &code
	c.finishedAt = time.Now()
	c.errMsg = msg
	if c.killReason != "" {
		c.errMsg = c.killReason
	}
	c.mu.Unlock()
	c.out.Close()
	close(c.done)
}

// setKillReason records why run c is being stopped; the first reason wins
// unless override.
func setKillReason(c *command, reason string, override bool) {
	c.mu.Lock()
	if c.killReason == "" || override {
		c.killReason = reason
	}
	c.mu.Unlock()
}

// signalRun sends sig to the processes of run c, if c is still the current
// run, and reports whether it was.
func (sh *shell) signalRun(c *command, sig syscall.Signal) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.cur != c {
		return false
	}
	signalDescendants(sh.pid, sig)
	return true
}

// stop ends run c: it records reason and signals the run's processes
// (the shell's descendants) with sig. The shell then goes on with the rest
// of the run, so, after a short grace, every process the run starts is
// killed as soon as it appears, until the run ends. When the run has not
// ended after stopGrace (a loop of builtins, which no signal to a child
// ends), the shell itself is killed, ending the session. It returns once c
// finished.
func (sh *shell) stop(c *command, reason string, sig syscall.Signal) {
	if !c.running() {
		return
	}
	setKillReason(c, reason, false)
	sh.mu.Lock()
	if sh.cur == c && sh.stopSig == 0 {
		sh.stopSig = sig
	}
	sh.mu.Unlock()
	sh.signalRun(c, sig)
	if waitClosed(c.done, stopFirstGrace) {
		return
	}
	deadline := time.Now().Add(stopGrace)
	for time.Now().Before(deadline) {
		if !sh.signalRun(c, syscall.SIGKILL) || waitClosed(c.done, stopPoll) {
			<-c.done
			return
		}
	}
	setKillReason(c, reason+"; the shell did not return, so it was killed and the session has ended", true)
	sh.log.Warn("killing a shell that did not finish a stopped run", "session_id", sh.id, "reason", reason)
	if !closed(sh.exited) {
		killGroup(sh.pid, syscall.SIGKILL)
	}
	<-c.done
}

// kill ends the shell and everything it started, and waits for it.
func (sh *shell) kill(reason string) {
	if closed(sh.exited) {
		return
	}
	sh.mu.Lock()
	if sh.cur != nil {
		setKillReason(sh.cur, reason, false)
	}
	signalDescendants(sh.pid, syscall.SIGKILL)
	sh.mu.Unlock()
	killGroup(sh.pid, syscall.SIGKILL)
	<-sh.exited
}

func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// sessionTable owns the bash sessions.
type sessionTable struct {
	cfg    *Config
	log    *slog.Logger
	mu     sync.Mutex
	byID   map[string]*shell
	closed bool
}

// create starts a session whose shell starts in cwd (relative to the
// configured WorkDir). Errors: INVALID_PATH/FILE_NOT_FOUND for cwd,
// TOO_MANY_REQUESTS beyond MaxCommands sessions, UNAVAILABLE when closing.
func (t *sessionTable) create(cwd string) (*shell, error) {
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
		return nil, sandbox.Errorf(sandbox.CodeTooManyRequests, "too many sessions (limit %d); delete some first", t.cfg.MaxCommands)
	}
	t.mu.Unlock()
	id := newID("session")
	sh, err := startShell(t.cfg, t.log, id, dir)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		go sh.kill("execd is shutting down")
		return nil, sandbox.Errorf(sandbox.CodeUnavailable, "execd is shutting down")
	}
	t.byID[id] = sh
	return sh, nil
}

// get returns the session id, or a SESSION_NOT_FOUND error.
func (t *sessionTable) get(id string) (*shell, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sh, ok := t.byID[id]
	if !ok {
		return nil, sandbox.Errorf(sandbox.CodeSessionNotFound, "session %q not found", id)
	}
	return sh, nil
}

// remove forgets session id and kills its shell, or fails with
// SESSION_NOT_FOUND.
func (t *sessionTable) remove(id string) error {
	t.mu.Lock()
	sh, ok := t.byID[id]
	delete(t.byID, id)
	t.mu.Unlock()
	if !ok {
		return sandbox.Errorf(sandbox.CodeSessionNotFound, "session %q not found", id)
	}
	sh.kill("session deleted")
	return nil
}

// closeAll kills every session and refuses new ones.
func (t *sessionTable) closeAll() {
	t.mu.Lock()
	t.closed = true
	all := make([]*shell, 0, len(t.byID))
	for id, sh := range t.byID {
		all = append(all, sh)
		delete(t.byID, id)
	}
	t.mu.Unlock()
	var wg sync.WaitGroup
	for _, sh := range all {
		wg.Add(1)
		go func() { defer wg.Done(); sh.kill("execd is shutting down") }()
	}
	wg.Wait()
}

// procEntry is one process found under /proc.
type procEntry struct{ pid, ppid, pgid int }

// descendants returns the live processes below root, found by a scan of
// /proc (zombies are skipped: they are already dead).
func descendants(root int) []procEntry {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := make(map[int][]procEntry)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := readProcStat(pid); ok {
			children[p.ppid] = append(children[p.ppid], p)
		}
	}
	var out []procEntry
	queue := []int{root}
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// readProcStat parses /proc/<pid>/stat; ok is false for a zombie or a
// process that is gone.
func readProcStat(pid int) (procEntry, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procEntry{}, false
	}
	return parseProcStat(pid, string(b))
}

// parseProcStat parses the text of /proc/<pid>/stat: "pid (comm) state
// ppid pgrp ...", where comm may hold spaces and parentheses.
func parseProcStat(pid int, s string) (procEntry, bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procEntry{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 3 || f[0] == "Z" || f[0] == "X" {
		return procEntry{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgid, err2 := strconv.Atoi(f[2])
	if err1 != nil || err2 != nil {
		return procEntry{}, false
	}
	return procEntry{pid: pid, ppid: ppid, pgid: pgid}, true
}

// signalDescendants sends sig to every process below root and to the
// process groups they lead (a pipeline or daemon that made its own group),
// never to root's group or execd's. With SIGKILL it repeats while new
// processes appear (a fork racing the scan), a few times at most.
func signalDescendants(root int, sig syscall.Signal) {
	self := syscall.Getpgrp()
	for pass := 0; pass < 5; pass++ {
		procs := descendants(root)
		if len(procs) == 0 {
			return
		}
		for _, p := range procs {
			if p.pgid == p.pid && p.pgid != root && p.pgid != self {
				_ = syscall.Kill(-p.pgid, sig)
			}
			_ = syscall.Kill(p.pid, sig)
		}
		if sig != syscall.SIGKILL {
			return
		}
	}
}
