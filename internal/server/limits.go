package server

import (
	"runtime"
	"syscall"

	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/lifecycle"
)

// HostLimits returns the bounds of this host: its CPUs (as this process may
// use them), its RAM, the kernel's pid_max and, when dir is not empty, the
// size of the file system holding dir (for the disk bound). A fact that
// cannot be read is left zero: no bound of that kind. MaxTimeout is not a
// fact of the host and is left zero (lifecycle.MaxTimeoutCeiling applies).
func HostLimits(dir string) lifecycle.Limits {
	l := lifecycle.Limits{MaxMilliCPU: int64(runtime.NumCPU()) * 1000}
	if n, err := procfs.MemTotal(); err == nil {
		l.MaxMemoryBytes = n
	}
	if n, err := procfs.PIDMax(); err == nil {
		l.MaxPIDs = n
	}
	if dir != "" {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err == nil {
			l.MaxDiskBytes = int64(st.Blocks) * int64(st.Bsize)
		}
	}
	// A host smaller than a bound's minimum still takes the minimum, so
	// that the bounds stay valid (lifecycle.Limits.Validate).
	l.MaxMilliCPU = max(l.MaxMilliCPU, lifecycle.MinMilliCPU)
	if l.MaxMemoryBytes > 0 {
		l.MaxMemoryBytes = max(l.MaxMemoryBytes, lifecycle.MinMemoryBytes)
	}
	if l.MaxPIDs > 0 {
		l.MaxPIDs = max(l.MaxPIDs, lifecycle.MinPIDs)
	}
	if l.MaxDiskBytes > 0 {
		l.MaxDiskBytes = max(l.MaxDiskBytes, lifecycle.MinDiskBytes)
	}
	return l
}
