package sandbox

import (
	"fmt"
	"strings"
)

// State is the lifecycle state of a sandbox. The set is closed: backends map
// their own observations onto these values and document how.
type State string

const (
	StatePending    State = "Pending"
	StateRunning    State = "Running"
	StatePausing    State = "Pausing"
	StatePaused     State = "Paused"
	StateResuming   State = "Resuming"
	StateStopping   State = "Stopping"
	StateTerminated State = "Terminated"
	StateFailed     State = "Failed"
)

// States lists every State in lifecycle order.
var States = []State{
	StatePending, StateRunning, StatePausing, StatePaused,
	StateResuming, StateStopping, StateTerminated, StateFailed,
}

// ParseState returns the State named s, or an error for any other value.
func ParseState(s string) (State, error) {
	for _, st := range States {
		if string(st) == s {
			return st, nil
		}
	}
	return "", Errorf(CodeInvalidRequest, "unknown sandbox state %q", s)
}

// Terminal reports whether no further transition leaves s.
func (s State) Terminal() bool { return s == StateTerminated || s == StateFailed }

// transitions lists the states each state may move to.
var transitions = map[State][]State{
	StatePending:  {StateRunning, StateStopping, StateFailed, StateTerminated},
	StateRunning:  {StatePausing, StateStopping, StateFailed, StateTerminated},
	StatePausing:  {StatePaused, StateRunning, StateStopping, StateFailed},
	StatePaused:   {StateResuming, StateStopping, StateFailed, StateTerminated},
	StateResuming: {StateRunning, StatePaused, StateStopping, StateFailed},
	StateStopping: {StateTerminated, StateFailed},
}

// CanTransition reports whether a sandbox may move from s to next.
func (s State) CanTransition(next State) bool {
	for _, t := range transitions[s] {
		if t == next {
			return true
		}
	}
	return false
}

// CheckTransition returns a CodeConflict error when s cannot move to next.
func (s State) CheckTransition(next State) error {
	if s.CanTransition(next) {
		return nil
	}
	return &Error{Code: CodeConflict, Message: fmt.Sprintf("sandbox is %s and cannot become %s", s, next)}
}

// Reason codes of a box that died on its own rather than being stopped: a
// backend's Info.Reason for it begins with one, then ": " and what the
// backend saw (an exit code, a signal, how many OOM kills). The server
// keeps the record of such a box, Failed with that reason, until it is
// deleted (or expires).
const (
	// ReasonOOMKilled: the kernel's OOM killer ended the box's main
	// process (its init, or its container's first process) at the box's
	// memory limit.
	ReasonOOMKilled = "oom_killed"
	// ReasonExited: the box's main process exited, or was killed by a
	// signal, for another reason.
	ReasonExited = "box_exited"
	// ReasonLost: the backend no longer has the box.
	ReasonLost = "box_lost"
)

// DiedReason reports whether reason (a record's or an Info's) says that a
// box died on its own: one of the codes above, alone or followed by ": "
// and a message.
func DiedReason(reason string) bool {
	code, _, _ := strings.Cut(reason, ": ")
	switch code {
	case ReasonOOMKilled, ReasonExited, ReasonLost:
		return true
	}
	return false
}
