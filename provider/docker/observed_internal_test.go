package docker

import (
	"testing"

	"github.com/moby/moby/api/types/container"

	"github.com/astrabox/astrabox/sandbox"
)

// TestObserved maps what the engine reports of a container onto a state
// and a reason: a stopped container says how its box died.
func TestObserved(t *testing.T) {
	for _, tt := range []struct {
		name   string
		state  *container.State
		want   sandbox.State
		reason string
	}{
		{"running", &container.State{Status: container.StateRunning}, sandbox.StateRunning, ""},
		{"paused", &container.State{Status: container.StatePaused}, sandbox.StatePaused, ""},
		{"created", &container.State{Status: container.StateCreated}, sandbox.StatePending, ""},
		{"oom killed", &container.State{Status: container.StateExited, ExitCode: 137, OOMKilled: true}, sandbox.StateFailed,
			"oom_killed: container exited with exit code 137 after the kernel's OOM killer ran in it at the box's memory limit"},
		{"exited", &container.State{Status: container.StateExited, ExitCode: 2}, sandbox.StateFailed,
			"box_exited: container exited with exit code 2"},
		{"exited 0 after an OOM kill", &container.State{Status: container.StateExited, OOMKilled: true}, sandbox.StateFailed,
			"box_exited: container exited with exit code 0"},
		{"dead with an error", &container.State{Status: container.StateDead, ExitCode: 128, Error: "mount failed"}, sandbox.StateFailed,
			"box_exited: container dead with exit code 128: mount failed"},
		{"no state", nil, sandbox.StateFailed, "the engine reports no state"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			state, reason := observed(tt.state)
			if state != tt.want || reason != tt.reason {
				t.Fatalf("observed %s %q, want %s %q", state, reason, tt.want, tt.reason)
			}
		})
	}
}
