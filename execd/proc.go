package execd

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/astrabox/astrabox/sandbox"
)

func defaultShell() string {
	for _, sh := range []string{"/bin/bash", "/usr/bin/bash", "/bin/sh"} {
		if _, err := os.Stat(sh); err == nil {
			return sh
		}
	}
	return "/bin/sh"
}

// mergeEnv returns base with extra applied on top (extra wins), validating
// extra's names.
func mergeEnv(base []string, extra map[string]string) ([]string, error) {
	if len(extra) == 0 {
		return base, nil
	}
	out := make([]string, 0, len(base)+len(extra))
	for _, kv := range base {
		k, _, _ := strings.Cut(kv, "=")
		if _, over := extra[k]; !over {
			out = append(out, kv)
		}
	}
	for k, v := range extra {
		if err := sandbox.ValidateEnvName(k); err != nil {
			return nil, err
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "environment variable %s contains a NUL byte", k)
		}
		out = append(out, k+"="+v)
	}
	return out, nil
}

// resolveDir returns the directory a process should start in: cwd if given
// (relative to base), else base. It must exist and be a directory.
func resolveDir(base, cwd string) (string, error) {
	dir := cwd
	if dir == "" {
		dir = base
	}
	if dir == "" {
		return "", nil
	}
	if strings.IndexByte(dir, 0) >= 0 {
		return "", sandbox.Errorf(sandbox.CodeInvalidPath, "working directory contains a NUL byte")
	}
	if !filepath.IsAbs(dir) && base != "" {
		dir = filepath.Join(base, dir)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return "", fsError("working directory", dir, err)
	}
	if !fi.IsDir() {
		return "", sandbox.Errorf(sandbox.CodeInvalidPath, "working directory %s is not a directory", dir)
	}
	return dir, nil
}

// credential returns the process credential for uid/gid, or nil to run as
// execd's own user. gid without uid is refused.
func credential(uid, gid *uint32) (*syscall.Credential, error) {
	if uid == nil && gid == nil {
		return nil, nil
	}
	if uid == nil {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "gid requires uid")
	}
	c := &syscall.Credential{Uid: *uid, Gid: *uid}
	if gid != nil {
		c.Gid = *gid
	}
	if c.Uid == uint32(os.Getuid()) && c.Gid == uint32(os.Getgid()) {
		return nil, nil
	}
	c.NoSetGroups = c.Uid == uint32(os.Getuid())
	return c, nil
}

// killGroup sends sig to the process group led by pid. It ignores a group
// that is already gone.
func killGroup(pid int, sig syscall.Signal) {
	if pid <= 0 {
		return
	}
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		_ = syscall.Kill(pid, sig)
	}
}

// exitCode is the shell-style exit status: the code, or 128+signal.
func exitCode(ps *os.ProcessState) int {
	if ps == nil {
		return -1
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

var signalNames = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "STOP": syscall.SIGSTOP,
	"CONT": syscall.SIGCONT, "TSTP": syscall.SIGTSTP, "WINCH": syscall.SIGWINCH, "ALRM": syscall.SIGALRM,
	"PIPE": syscall.SIGPIPE,
}

// parseSignal accepts "SIGTERM", "TERM", "term" or a number 1..64.
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.TrimPrefix(strings.ToUpper(strings.TrimSpace(s)), "SIG")
	if sig, ok := signalNames[name]; ok {
		return sig, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n <= 64 {
		return syscall.Signal(n), nil
	}
	return 0, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown signal %q", s)
}
