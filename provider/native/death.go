package native

import (
	"fmt"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// initExit is how a box's init ended, as the Provider that started it saw
// when it reaped it. A Provider that did not start the box (after a
// restart) has none: the box's cgroup then tells what it can.
type initExit struct {
	done   chan struct{} // closed once status and known are set
	status syscall.WaitStatus
	known  bool
}

// reapWait bounds how long deathReason waits for the reaper of an init
// that is already gone to record its status (it does so at once).
const reapWait = 5 * time.Second

// initStatus returns how box id's init ended, when this Provider started
// it and has reaped it. It is called once init is gone (reaped, so its
// status is being recorded).
func (p *Provider) initStatus(id string) (syscall.WaitStatus, bool) {
	v, ok := p.exits.Load(id)
	if !ok {
		return 0, false
	}
	exit := v.(*initExit)
	select {
	case <-exit.done:
		return exit.status, exit.known
	case <-time.After(reapWait):
		return 0, false
	}
}

// deathReason is the reason of a box whose init is gone, from init's wait
// status (when this Provider reaped it) and the OOM kills its cgroup
// counted (see death).
func (p *Provider) deathReason(id string) string {
	status, known := p.initStatus(id)
	ooms, err := p.cg.oomKills(id)
	if err != nil {
		ooms = 0
	}
	limit, err := p.cg.memoryLimit(id)
	if err != nil {
		limit = 0
	}
	return death{status: status, known: known, oomKills: ooms, memoryLimit: limit}.reason(func() string { return p.logTail(id) })
}

// death is what is known of how a box's init ended.
type death struct {
	status      syscall.WaitStatus
	known       bool  // status is init's (this Provider reaped it)
	oomKills    int64 // OOM kills the box's cgroup counted
	memoryLimit int64 // the box's memory limit (0: unknown)
}

// reason says how the box died, as a sandbox reason ("code: message"):
//
//   - sandbox.ReasonOOMKilled when the box's cgroup counted OOM kills and
//     init was killed by SIGKILL (what the OOM killer sends), or its
//     status is unknown: the OOM killer took init, or everything else
//     first and then init;
//   - sandbox.ReasonExited otherwise, with init's exit code (and the end
//     of the box's output log, where init writes why it stopped) or the
//     signal that killed it.
//
// logTail is called only when the log is part of the reason.
func (d death) reason(logTail func() string) string {
	ooms := ""
	if d.oomKills > 0 {
		ooms = fmt.Sprintf("; the kernel's OOM killer ran %d time%s in the box", d.oomKills, plural(d.oomKills))
		if d.memoryLimit > 0 {
			ooms += " at its memory limit of " + formatMiB(d.memoryLimit)
		}
	}
	switch {
	case d.oomKills > 0 && (!d.known || d.status.Signaled() && d.status.Signal() == unix.SIGKILL):
		how := "the box's init was killed (SIGKILL)"
		if !d.known {
			how = "the box's init is gone (its exit status is unknown to this server)"
		}
		return sandbox.ReasonOOMKilled + ": " + how + ooms
	case d.known && d.status.Signaled():
		sig := d.status.Signal()
		return fmt.Sprintf("%s: the box's init was killed by signal %d (%s)%s", sandbox.ReasonExited, int(sig), unix.SignalName(sig), ooms)
	case d.known:
		return fmt.Sprintf("%s: the box's init exited with exit code %d%s: %s", sandbox.ReasonExited, d.status.ExitStatus(), ooms, logTail())
	}
	return sandbox.ReasonExited + ": the box's init exited (its exit status is unknown to this server): " + logTail()
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// formatMiB writes a byte count in MiB, or in bytes when it is no whole
// number of MiB.
func formatMiB(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}
