package execd

import (
	"syscall"
	"time"
)

// changeTime is the inode change time of st.
func changeTime(st *syscall.Stat_t) (time.Time, bool) {
	return time.Unix(st.Ctim.Unix()), true
}
