//go:build !linux

package execd

import (
	"syscall"
	"time"
)

// changeTime is not read on this platform; callers fall back to the
// modification time.
func changeTime(*syscall.Stat_t) (time.Time, bool) { return time.Time{}, false }
