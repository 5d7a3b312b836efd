package agent

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

const (
	// maxStreamOutput bounds each of a command's stdout and stderr in the
	// result (head and tail kept).
	maxStreamOutput = 32 << 10
	// maxShellTimeout caps a timeout_seconds the model asks for.
	maxShellTimeout = time.Hour
	// shellWaitDelay is how long output pipes stay open after bash exits,
	// for a background process that still holds them (its later output is
	// lost; redirect it to a file to keep it).
	shellWaitDelay = 2 * time.Second
)

type shellArgs struct {
	Command        string  `json:"command"`
	TimeoutSeconds flexInt `json:"timeout_seconds"`
}

type shellResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	TimedOut bool   `json:"timed_out"`
}

// timeout returns the command's timeout: the model's timeout_seconds when
// positive (at most maxShellTimeout), else def.
func (a shellArgs) timeout(def time.Duration) time.Duration {
	if a.TimeoutSeconds <= 0 {
		return def
	}
	if a.TimeoutSeconds >= flexInt(maxShellTimeout/time.Second) {
		return maxShellTimeout
	}
	return time.Duration(a.TimeoutSeconds) * time.Second
}

// shell runs `bash -c command` in the workspace with empty stdin, in a
// process group of its own. At the timeout, or when ctx ends, the whole
// group is killed with SIGKILL; an exit by signal is reported as exit code
// 128+signal, as shells do. When ctx ends the error wraps
// errToolInterrupted.
func (tb *toolbox) shell(ctx context.Context, raw string) (any, error) {
	var a shellArgs
	if err := decodeArgs(raw, &a); err != nil {
		return nil, err
	}
	if strings.TrimSpace(a.Command) == "" {
		return nil, errors.New("command is required")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errToolInterrupted, err)
	}
	runCtx, cancel := context.WithTimeout(ctx, a.timeout(tb.shellTimeout))
	defer cancel()

	stdout, stderr := newHeadTail(maxStreamOutput), newHeadTail(maxStreamOutput)
	cmd := exec.CommandContext(runCtx, "bash", "-c", a.Command)
	cmd.Dir = tb.workspace
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var killed atomic.Bool
	cmd.Cancel = func() error {
		killed.Store(true)
		// With Setpgid the group id is bash's pid.
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	cmd.WaitDelay = shellWaitDelay
	err := cmd.Run()
	if cmd.ProcessState == nil {
		return nil, fmt.Errorf("start bash: %w", err)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("%w: %w", errToolInterrupted, ctx.Err())
	}
	res := shellResult{
		ExitCode: cmd.ProcessState.ExitCode(),
		Stdout:   stdout.String(),
		Stderr:   stderr.String(),
		TimedOut: killed.Load(),
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = 128 + int(ws.Signal())
	}
	return res, nil
}
