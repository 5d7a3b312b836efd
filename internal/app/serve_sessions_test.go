package app

import (
	"strings"
	"testing"

	"github.com/astrabox/astrabox/lifecycle"
)

func TestSessionLimitsConfig(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
		want                lifecycle.SessionLimits // when no error
	}{
		{"all keys", `{"sessionLimits": {"nativeStateBytes": "32Mi", "replyBytes": "8Mi", "sessionBytes": "1Gi", "replyFrames": 50000, "framesPerSecond": 500}}`, "",
			lifecycle.SessionLimits{NativeStateBytes: 32 << 20, ReplyBytes: 8 << 20, SessionBytes: 1 << 30, ReplyFrames: 50000, FramesPerSecond: 500}},
		{"omitted", `{}`, "", lifecycle.SessionLimits{}},
		{"unknown key", `{"sessionLimits": {"replyFrame": 1}}`, `unknown field "replyFrame"`, lifecycle.SessionLimits{}},
		{"bad quantity", `{"sessionLimits": {"replyBytes": "lots"}}`, "sessionLimits.replyBytes", lifecycle.SessionLimits{}},
		{"negative bytes", `{"sessionLimits": {"sessionBytes": "-1Mi"}}`, "sessionLimits.sessionBytes", lifecycle.SessionLimits{}},
		{"negative frames", `{"sessionLimits": {"replyFrames": -1}}`, "sessionLimits.replyFrames", lifecycle.SessionLimits{}},
		{"rate past the bound", `{"sessionLimits": {"framesPerSecond": 2000000}}`, "sessionLimits.framesPerSecond", lifecycle.SessionLimits{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(tc.json), &cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decodeConfig = %v, want %q", err, tc.wantErr)
			}
			if err != nil {
				return
			}
			if got, _ := cfg.SessionLimits.limits(); got != tc.want {
				t.Fatalf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}
