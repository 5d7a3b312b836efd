package execd

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// privatePair returns the ends of one of a command's standard streams as a
// connected pair of stream sockets, which no other process can open again
// through /proc/<pid>/fd (see wire.RunCommandRequest.PrivateStdio): r is
// read and w written, and the command gets the end childReads names. Like
// a pipe's, the pair is one way, and the command's end blocks; execd's end
// is pollable, so its reads and writes take deadlines.
func privatePair(childReads bool) (r, w *os.File, err error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	_ = unix.Shutdown(fds[0], unix.SHUT_WR)
	_ = unix.Shutdown(fds[1], unix.SHUT_RD)
	mine := fds[0]
	if childReads {
		mine = fds[1]
	}
	if err := unix.SetNonblock(mine, true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	return os.NewFile(uintptr(fds[0]), "|0"), os.NewFile(uintptr(fds[1]), "|1"), nil
}
