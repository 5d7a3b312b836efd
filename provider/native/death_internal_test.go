package native

import (
	"syscall"
	"testing"
)

// TestDeathReason names how a box died from init's wait status and the
// OOM kills of its cgroup.
func TestDeathReason(t *testing.T) {
	exited := func(code int) syscall.WaitStatus { return syscall.WaitStatus(code << 8) }
	killed := func(sig syscall.Signal) syscall.WaitStatus { return syscall.WaitStatus(sig) }
	for _, tt := range []struct {
		name string
		d    death
		want string
	}{
		{"OOM killer took init", death{status: killed(syscall.SIGKILL), known: true, oomKills: 1, memoryLimit: 64 << 20},
			"oom_killed: the box's init was killed (SIGKILL); the kernel's OOM killer ran 1 time in the box at its memory limit of 64 MiB"},
		{"OOM kills, status unknown after a restart", death{oomKills: 3, memoryLimit: 100000000},
			"oom_killed: the box's init is gone (its exit status is unknown to this server); the kernel's OOM killer ran 3 times in the box at its memory limit of 100000000 bytes"},
		{"OOM kills, limit unknown", death{status: killed(syscall.SIGKILL), known: true, oomKills: 2},
			"oom_killed: the box's init was killed (SIGKILL); the kernel's OOM killer ran 2 times in the box"},
		{"killed by SIGKILL without OOM", death{status: killed(syscall.SIGKILL), known: true, memoryLimit: 64 << 20},
			"box_exited: the box's init was killed by signal 9 (SIGKILL)"},
		{"killed by another signal after an OOM kill", death{status: killed(syscall.SIGSEGV), known: true, oomKills: 1, memoryLimit: 64 << 20},
			"box_exited: the box's init was killed by signal 11 (SIGSEGV); the kernel's OOM killer ran 1 time in the box at its memory limit of 64 MiB"},
		{"exit code", death{status: exited(1), known: true},
			"box_exited: the box's init exited with exit code 1: astrabox init: execd stopped"},
		{"exit code after an OOM kill", death{status: exited(0), known: true, oomKills: 1, memoryLimit: 32 << 20},
			"box_exited: the box's init exited with exit code 0; the kernel's OOM killer ran 1 time in the box at its memory limit of 32 MiB: astrabox init: execd stopped"},
		{"unknown, no OOM", death{},
			"box_exited: the box's init exited (its exit status is unknown to this server): astrabox init: execd stopped"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.d.reason(func() string { return "astrabox init: execd stopped" }); got != tt.want {
				t.Fatalf("reason\n got %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestOOMKillCount reads cgroup v2's memory.events and v1's
// memory.oom_control.
func TestOOMKillCount(t *testing.T) {
	for _, tt := range []struct {
		name    string
		file    string
		want    int64
		wantErr bool
	}{
		{"v2", "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n", 1, false},
		{"v2 none", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\n", 0, false},
		{"v1", "oom_kill_disable 0\nunder_oom 0\noom_kill 4\n", 4, false},
		{"v1 before Linux 4.13", "oom_kill_disable 0\nunder_oom 0\n", 0, true},
		{"garbage", "oom_kill many\n", 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := oomKillCount(tt.file)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Fatalf("oomKillCount = %d, %v; want %d, error %t", got, err, tt.want, tt.wantErr)
			}
		})
	}
}
