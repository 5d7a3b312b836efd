package execd

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"

	"github.com/creack/pty"
)

// ptyPollable returns a copy of f whose descriptor is non-blocking and
// registered with the runtime poller, so that reads honour deadlines and
// Close interrupts them, and closes f. (creack/pty leaves the master in
// blocking mode.)
func ptyPollable(f *os.File) (*os.File, error) {
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, err
	}
	nfd, errno := -1, syscall.Errno(0)
	if err := rc.Control(func(fd uintptr) {
		r, _, e := syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_DUPFD_CLOEXEC, 0)
		nfd, errno = int(r), e
	}); err != nil {
		return nil, err
	}
	if errno != 0 {
		return nil, fmt.Errorf("dup: %w", errno)
	}
	if err := syscall.SetNonblock(nfd, true); err != nil {
		syscall.Close(nfd)
		return nil, fmt.Errorf("set non-blocking: %w", err)
	}
	return os.NewFile(uintptr(nfd), f.Name()), nil
}

// ptyIoctl runs an ioctl on f without putting f into blocking mode (which
// f.Fd() would).
func ptyIoctl(f *os.File, req uintptr, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = syscall.Syscall(syscall.SYS_IOCTL, fd, req, uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func ptySetWinsize(master *os.File, cols, rows uint16) error {
	ws := pty.Winsize{Cols: cols, Rows: rows}
	if err := ptyIoctl(master, syscall.TIOCSWINSZ, unsafe.Pointer(&ws)); err != nil {
		return fmt.Errorf("set terminal size: %w", err)
	}
	return nil
}

// ptyForeground is the foreground process group of the terminal whose
// master is master.
func ptyForeground(master *os.File) (int, error) {
	var pg int32
	if err := ptyIoctl(master, syscall.TIOCGPGRP, unsafe.Pointer(&pg)); err != nil {
		return 0, fmt.Errorf("get foreground process group: %w", err)
	}
	return int(pg), nil
}

// ptyWaitNoReap blocks until process pid has exited, leaving it a zombie for
// Wait to reap.
func ptyWaitNoReap(pid int) error {
	const pPID = 1     // idtype_t P_PID
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid),
			uintptr(unsafe.Pointer(&info[0])), syscall.WEXITED|syscall.WNOWAIT, 0, 0)
		switch errno {
		case 0:
			return nil
		case syscall.EINTR:
			continue
		}
		return fmt.Errorf("waitid: %w", errno)
	}
}

// ptyKillSession sends sig to every process group of the terminal session
// led by sid: the leader's own group and the groups of the jobs it started.
// The caller guarantees that sid still names that session (its leader is
// alive or an unreaped zombie).
func ptyKillSession(sid int, sig syscall.Signal) {
	if sid <= 0 {
		return
	}
	killGroup(sid, sig)
	for range 2 {
		groups := ptySessionGroups(sid)
		if len(groups) == 0 {
			return
		}
		for _, g := range groups {
			killGroup(g, sig)
		}
	}
}

// ptySessionGroups lists the process groups of the live processes in session
// sid, from /proc.
func ptySessionGroups(sid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	seen := map[int]bool{}
	var groups []int
	for _, e := range entries {
		name := e.Name()
		if name[0] < '0' || name[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// After "pid (comm) ": state ppid pgrp session ...
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		var state byte
		var ppid, pgrp, session int
		if _, err := fmt.Sscanf(string(b[i+1:]), " %c %d %d %d", &state, &ppid, &pgrp, &session); err != nil {
			continue
		}
		if session == sid && state != 'Z' && !seen[pgrp] {
			seen[pgrp] = true
			groups = append(groups, pgrp)
		}
	}
	return groups
}
