package sandboxtest

import (
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

// Harness supplies the backend under test.
type Harness interface {
	// Provider is the backend under test.
	Provider() sandbox.Provider
	// Spec is the spec of an ordinary box (its image has bash, coreutils
	// and python3; its network mode is the default, none).
	Spec() sandbox.Spec
}

// The interfaces below are optional: a harness implements those it can,
// and the cases that need one skip, saying which, where it does not.

// LeakChecker is implemented by harnesses that can tell whether anything of
// a deleted box is left on the host (processes, mounts, cgroups, files).
type LeakChecker interface {
	CheckGone(t *testing.T, id string)
}

// Reopener is implemented by harnesses that can make a second Provider of
// the backend on the same host state as Provider() (data dir, engine,
// owner), sharing nothing in memory with it, as a restarted server does.
// The Reattach case needs it.
//
// What Reopen made lives until the harness releases Provider(), and is
// released first: a restart leaves the host state of running boxes in
// place, and Provider() keeps serving the other cases.
type Reopener interface {
	Reopen(t *testing.T) sandbox.Provider
}

// Orphaner is implemented by harnesses that can make a running box an
// orphan the way a crash between starting it and recording it does: drop
// the backend's record of box id and leave everything else of it on the
// host. The Orphans case needs it to check that List still finds the box.
type Orphaner interface {
	Orphan(t *testing.T, id string)
}

// TaskCounter is implemented by harnesses that can read, from the host,
// how many tasks the pids cgroup of box id holds: a box at its pids limit
// cannot start a command to tell. The fork bomb of the Limits case needs
// it.
type TaskCounter interface {
	Tasks(t testing.TB, id string) int64
}

// Hardened is implemented by harnesses of isolating backends to add to the
// KernelSurface case what only they can state: the suite checks a
// baseline every isolating backend meets, then the harness's Hardening.
type Hardened interface {
	Hardening() Hardening
}

// Hardening is what a backend's boxes show beyond the KernelSurface
// baseline. Every field adds checks; none removes one.
type Hardening struct {
	// Denied are further commands that must fail in a box.
	Denied []Probe
	// Syscalls are further syscalls a box refuses when called with zero
	// arguments, each with the errno it fails with.
	Syscalls []Syscall
	// Devices, when set, is exactly what `ls /dev` lists in a box; the
	// baseline requires the standard character devices and no block or
	// kernel device.
	Devices []string
	// RootStatus are further lines that /proc/self/status of root in a box
	// holds (its capability sets, say).
	RootStatus []string
	// HostPaths are host paths (the backend's data dir, the directory of
	// the binary it puts into boxes, ...) that no line of a box's
	// mountinfo may contain.
	HostPaths []string
}

// Probe is a shell command run in a box, named for its subtest.
type Probe struct {
	Name    string
	Command string
}

// Syscall is an x86-64 syscall number and the errno a box's call of it
// (with zero arguments) fails with.
type Syscall struct {
	Name  string
	Nr    int
	Errno int
}
