package app

import (
	"fmt"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/lifecycle"
)

// sessionLimitsConfig is the "sessionLimits" section of the config file:
// what one agent Session may cost the server where its RuntimeProfile's
// session_limits set nothing (see lifecycle.SessionLimits). An omitted key
// takes the built-in default (runner.DefaultLimits).
type sessionLimitsConfig struct {
	// NativeStateBytes, ReplyBytes and SessionBytes are byte quantities
	// ("64Mi", "1G").
	NativeStateBytes string `json:"nativeStateBytes"`
	ReplyBytes       string `json:"replyBytes"`
	SessionBytes     string `json:"sessionBytes"`
	// ReplyFrames bounds a reply's frames; FramesPerSecond a Session's
	// sustained frame rate.
	ReplyFrames     int64 `json:"replyFrames"`
	FramesPerSecond int64 `json:"framesPerSecond"`
}

// limits returns the section's limits (zero for omitted keys), or an error
// naming the first key it refuses.
func (c sessionLimitsConfig) limits() (lifecycle.SessionLimits, error) {
	l := lifecycle.SessionLimits{ReplyFrames: c.ReplyFrames, FramesPerSecond: c.FramesPerSecond}
	for _, f := range []struct {
		key string
		raw string
		to  *int64
	}{
		{"nativeStateBytes", c.NativeStateBytes, &l.NativeStateBytes},
		{"replyBytes", c.ReplyBytes, &l.ReplyBytes},
		{"sessionBytes", c.SessionBytes, &l.SessionBytes},
	} {
		if f.raw == "" {
			continue
		}
		n, err := api.ParseBytes(f.raw)
		if err != nil {
			return l, fmt.Errorf("sessionLimits.%s: %w", f.key, err)
		}
		*f.to = n
	}
	for _, f := range []struct {
		key        string
		value, max int64
	}{
		{"nativeStateBytes", l.NativeStateBytes, lifecycle.MaxSessionLimit},
		{"replyBytes", l.ReplyBytes, lifecycle.MaxSessionLimit},
		{"sessionBytes", l.SessionBytes, lifecycle.MaxSessionLimit},
		{"replyFrames", l.ReplyFrames, lifecycle.MaxSessionLimit},
		{"framesPerSecond", l.FramesPerSecond, lifecycle.MaxFramesPerSecond},
	} {
		if f.value < 0 || f.value > f.max {
			return l, fmt.Errorf("sessionLimits.%s must be 0 (the default) to %d", f.key, f.max)
		}
	}
	return l, nil
}
