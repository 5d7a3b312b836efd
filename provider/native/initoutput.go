package native

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// initOutput routes everything a box's init and entrypoint print into the
// box's output log (see outputlog.go) through pipes: no process of the
// box but init ever holds the log's host file, so none can write to it,
// take it (pidfd_getfd, ptrace) or see its host path in /proc/<pid>/fd.
type initOutput struct {
	log  *cappedLog
	own  chan struct{} // closed once init's own pipe is drained
	file *os.File      // the log file (fdLog)
}

// startOutput takes over fdLog and makes init's own stdout and stderr a
// pipe into it. The pipe's write end never blocks, so that init never
// waits on its own output (not even while the runtime prints a crash,
// with every goroutine, the pipe's reader among them, stopped: the
// report then goes to the log file directly). The signals that make the
// Go runtime print a stack dump and exit (SIGQUIT, SIGABRT, ...) are
// ignored: box root may send them to PID 1.
func startOutput() (*initOutput, error) {
	signal.Notify(make(chan os.Signal, 1), syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
		syscall.SIGSTKFLT, syscall.SIGSYS)
	f := os.NewFile(fdLog, "log")
	l, err := newCappedLog(f, logMax)
	if err != nil {
		return nil, err
	}
	_ = debug.SetCrashOutput(f, debug.CrashOptions{})
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	if err := unix.SetNonblock(p[1], true); err != nil {
		return nil, fmt.Errorf("output pipe: %w", err)
	}
	for _, fd := range []int{1, 2} {
		if err := unix.Dup3(p[1], fd, 0); err != nil {
			return nil, fmt.Errorf("output pipe: %w", err)
		}
	}
	unix.Close(p[1])
	o := &initOutput{log: l, own: make(chan struct{}), file: f}
	r := os.NewFile(uintptr(p[0]), "output")
	go func() {
		defer close(o.own)
		defer r.Close()
		_, _ = io.Copy(l, r)
	}()
	return o, nil
}

// entrypointPipe returns the write end of a new pipe into the log, to be
// the entrypoint's stdout and stderr; the caller closes it once the
// entrypoint has started. Its reader ends when the last process holding
// it does.
func (o *initOutput) entrypointPipe() (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("entrypoint output pipe: %w", err)
	}
	go func() {
		defer r.Close()
		_, _ = io.Copy(o.log, r)
	}()
	return w, nil
}

// close ends init's own output: what init printed reaches the log before
// it exits (waiting at most a second).
func (o *initOutput) close() {
	_ = unix.Close(1)
	_ = unix.Close(2)
	select {
	case <-o.own:
	case <-time.After(time.Second):
	}
}
