package lifecycle

import "github.com/astrabox/astrabox/sandbox"

// SessionLimits bound what one agent Session may cost the server: the
// program's native state it mirrors into the store, and the output log its
// replies write. They are the agent platform's (platform/runner enforces
// them); the sandbox service stores and validates them only. A zero field
// takes the server's default, so a profile names only what it changes.
type SessionLimits struct {
	// NativeStateBytes bounds the Session's native state (the program's
	// own conversation file) held in the store. A larger file is not
	// mirrored: NATIVE_STATE_TOO_LARGE, recorded as native_state.refused.
	NativeStateBytes int64 `json:"native_state_bytes,omitempty"`
	// ReplyBytes bounds the payload bytes of the frames one reply's
	// program writes; past it the reply ends with REPLY_BYTES_EXCEEDED.
	ReplyBytes int64 `json:"reply_bytes,omitempty"`
	// ReplyFrames bounds how many frames one reply's program writes; past
	// it the reply ends with REPLY_FRAMES_EXCEEDED.
	ReplyFrames int64 `json:"reply_frames,omitempty"`
	// SessionBytes bounds the payload bytes of the Session's whole log;
	// past it the reply in progress ends, and every later input fails,
	// with SESSION_BYTES_EXCEEDED.
	SessionBytes int64 `json:"session_bytes,omitempty"`
	// FramesPerSecond is the sustained rate of frames a Session's program
	// may write, with a burst of ten seconds' worth; past it the reply
	// ends with FRAME_RATE_EXCEEDED.
	FramesPerSecond int64 `json:"frames_per_second,omitempty"`
}

// Bounds of SessionLimits' fields: large enough for any real Session, and
// small enough that sums of them cannot overflow.
const (
	MaxSessionLimit    = int64(1) << 40
	MaxFramesPerSecond = int64(1_000_000)
)

// Validate refuses a negative or oversized field with INVALID_REQUEST,
// naming the field as its JSON key under "session_limits.".
func (l SessionLimits) Validate() error {
	for _, f := range []struct {
		name  string
		value int64
		max   int64
	}{
		{"native_state_bytes", l.NativeStateBytes, MaxSessionLimit},
		{"reply_bytes", l.ReplyBytes, MaxSessionLimit},
		{"reply_frames", l.ReplyFrames, MaxSessionLimit},
		{"session_bytes", l.SessionBytes, MaxSessionLimit},
		{"frames_per_second", l.FramesPerSecond, MaxFramesPerSecond},
	} {
		if f.value < 0 || f.value > f.max {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "session_limits.%s must be 0 (the server's default) to %d, not %d", f.name, f.max, f.value)
		}
	}
	return nil
}

// Or returns l with each zero field taken from def.
func (l SessionLimits) Or(def SessionLimits) SessionLimits {
	pick := func(v, d int64) int64 {
		if v != 0 {
			return v
		}
		return d
	}
	return SessionLimits{
		NativeStateBytes: pick(l.NativeStateBytes, def.NativeStateBytes),
		ReplyBytes:       pick(l.ReplyBytes, def.ReplyBytes),
		ReplyFrames:      pick(l.ReplyFrames, def.ReplyFrames),
		SessionBytes:     pick(l.SessionBytes, def.SessionBytes),
		FramesPerSecond:  pick(l.FramesPerSecond, def.FramesPerSecond),
	}
}
