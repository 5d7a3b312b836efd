package app

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// keepProgramPrivate makes the agent program non-dumpable: other processes
// of its box, the tools it runs included, lack CAP_SYS_PTRACE, so none can
// open its descriptors through /proc/<pid>/fd (to write forged events to
// its output or inputs to its stdin), read its memory or environment, or
// take a descriptor with ptrace or pidfd_getfd. Only the program writes
// its event channel.
func keepProgramPrivate() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("make the agent non-dumpable: %w", err)
	}
	return nil
}
