package execd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/procfs"
)

// ChildGuard lets the process that hosts execd reap orphans safely when it
// is PID 1 of a box (every orphan of the box becomes its child) while
// execd collects the exit statuses of the processes it started itself.
// execd registers each child under the guard's lock as it starts it;
// ReapOrphans reaps every exited child that is not registered.
type ChildGuard struct {
	// spawning is held shared while execd starts a process and registers
	// it, exclusively while reaping.
	spawning sync.RWMutex
	mu       sync.Mutex
	pids     map[int]uint64 // pid -> start time, against pid reuse
}

// NewChildGuard returns an empty guard.
func NewChildGuard() *ChildGuard { return &ChildGuard{pids: map[int]uint64{}} }

// start runs startFn (which starts one process and returns its pid) so that
// no ReapOrphans runs between the process starting and its registration.
func (g *ChildGuard) start(startFn func() (int, error)) error {
	g.spawning.RLock()
	defer g.spawning.RUnlock()
	pid, err := startFn()
	if err != nil {
		return err
	}
	st := startTime(pid)
	g.mu.Lock()
	g.pids[pid] = st
	g.mu.Unlock()
	return nil
}

// ReapOrphans reaps every exited child of this process that execd did not
// start. Call it on SIGCHLD.
func (g *ChildGuard) ReapOrphans() {
	g.spawning.Lock()
	defer g.spawning.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	for pid, st := range g.pids {
		if startTime(pid) != st {
			delete(g.pids, pid) // collected by execd (or gone)
		}
	}
	for _, pid := range childPIDs() {
		if _, mine := g.pids[pid]; mine {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// Children reports how many children this process has (zombies included).
func (g *ChildGuard) Children() int { return len(childPIDs()) }

// childPIDs lists the children of every thread of this process.
func childPIDs() []int {
	tasks, _ := filepath.Glob("/proc/self/task/*/children")
	var out []int
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				out = append(out, pid)
			}
		}
	}
	return out
}

// startTime is pid's start time, zombies included (an exited child stays
// registered until execd has collected it), or 0 when it does not exist.
func startTime(pid int) uint64 {
	_, start, err := procfs.Stat(pid)
	if err != nil {
		return 0
	}
	return start
}
