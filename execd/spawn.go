package execd

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// startProcess starts cmd the way every process execd runs is started:
//   - a process that runs as a non-root user is forked from an OS thread
//     whose capability bounding set is empty, so it can never regain a
//     capability (capabilities are per thread and inherited at fork);
//   - its OOM score adjustment is reset to 0, so that when a box runs out
//     of memory the kernel picks the workload, not execd (whose host may
//     have protected it).
func startProcess(cmd *exec.Cmd) error {
	start := func() (int, error) {
		var err error
		if c := cmd.SysProcAttr; c != nil && c.Credential != nil && c.Credential.Uid != 0 {
			err = startUnprivileged(cmd)
		} else {
			err = cmd.Start()
		}
		if err != nil {
			return 0, err
		}
		return cmd.Process.Pid, nil
	}
	var err error
	if g := childGuard.Load(); g != nil {
		err = g.start(start)
	} else {
		_, err = start()
	}
	if err != nil {
		return err
	}
	_ = os.WriteFile("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/oom_score_adj", []byte("0"), 0)
	return nil
}

// childGuard is the ChildGuard of the process's Server, if it has one
// (one execd per process).
var childGuard atomic.Pointer[ChildGuard]

// unprivilegedSpawner forks processes from a thread with an empty
// capability bounding set. The thread stays locked to its goroutine for
// the life of execd, so no other goroutine ever runs on it.
var unprivilegedSpawner struct {
	once sync.Once
	reqs chan spawnRequest
	err  error
}

type spawnRequest struct {
	cmd  *exec.Cmd
	done chan error
}

func startUnprivileged(cmd *exec.Cmd) error {
	s := &unprivilegedSpawner
	s.once.Do(func() {
		s.reqs = make(chan spawnRequest)
		ready := make(chan error)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with execd
			if err := dropBoundingSet(); err != nil {
				ready <- err
				return
			}
			ready <- nil
			for r := range s.reqs {
				r.done <- r.cmd.Start()
			}
		}()
		s.err = <-ready
	})
	if s.err != nil {
		// Without CAP_SETPCAP (execd not running as root) the bounding set
		// cannot be emptied; the user switch itself then fails or is a
		// no-op, and the process gets no capabilities either way.
		return cmd.Start()
	}
	done := make(chan error, 1)
	s.reqs <- spawnRequest{cmd: cmd, done: done}
	return <-done
}

// dropBoundingSet empties the calling thread's capability bounding set.
func dropBoundingSet() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	return nil
}
