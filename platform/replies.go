package platform

import (
	"strings"

	"github.com/astrabox/astrabox/store"
)

// IsFrame reports whether a log entry is a UI frame (an AI SDK chunk type:
// "text-delta", "data-turn-accepted", ...) rather than a control event (a
// dotted name: "input.accepted", "state.changed", ...).
func IsFrame(e store.LogEntry) bool { return !strings.Contains(e.Type, ".") }

// Reply is the span of one reply's frames in the log.
type Reply struct {
	TurnID    string
	InputID   string
	MessageID string
	// Start is the seq of its first frame (data-turn-accepted); End the
	// seq of its finish frame, 0 while the reply is in progress.
	Start, End int64
}
