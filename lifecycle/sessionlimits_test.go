package lifecycle

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

func TestSessionLimitsValidate(t *testing.T) {
	tests := []struct {
		name   string
		limits SessionLimits
		want   string // in the message; "" when valid
	}{
		{"zero: the defaults", SessionLimits{}, ""},
		{"all set", SessionLimits{NativeStateBytes: 1 << 20, ReplyBytes: 1 << 20, ReplyFrames: 100, SessionBytes: 1 << 30, FramesPerSecond: 50}, ""},
		{"the bounds", SessionLimits{NativeStateBytes: MaxSessionLimit, FramesPerSecond: MaxFramesPerSecond}, ""},
		{"negative native state", SessionLimits{NativeStateBytes: -1}, "session_limits.native_state_bytes"},
		{"negative reply bytes", SessionLimits{ReplyBytes: -5}, "session_limits.reply_bytes"},
		{"negative reply frames", SessionLimits{ReplyFrames: -1}, "session_limits.reply_frames"},
		{"session bytes past the bound", SessionLimits{SessionBytes: MaxSessionLimit + 1}, "session_limits.session_bytes"},
		{"frame rate past the bound", SessionLimits{FramesPerSecond: MaxFramesPerSecond + 1}, "session_limits.frames_per_second"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.limits.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Validate = %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
				t.Fatalf("Validate = %v (%s), want INVALID_REQUEST naming %s", err, sandbox.CodeOf(err), tc.want)
			}
		})
	}
}

func TestSessionLimitsOr(t *testing.T) {
	def := SessionLimits{NativeStateBytes: 1, ReplyBytes: 2, ReplyFrames: 3, SessionBytes: 4, FramesPerSecond: 5}
	got := SessionLimits{ReplyFrames: 30, FramesPerSecond: 50}.Or(def)
	want := SessionLimits{NativeStateBytes: 1, ReplyBytes: 2, ReplyFrames: 30, SessionBytes: 4, FramesPerSecond: 50}
	if got != want {
		t.Fatalf("Or = %+v, want %+v", got, want)
	}
}

// TestProfileSessionLimitsJSON: the field round-trips under its snake_case
// keys, an unknown key in it is refused, and a profile without it has
// none.
func TestProfileSessionLimitsJSON(t *testing.T) {
	var p Profile
	if err := json.Unmarshal([]byte(`{"name": "p", "session_limits": {"native_state_bytes": 1048576, "reply_frames": 9, "frames_per_second": 4}}`), &p); err != nil {
		t.Fatal(err)
	}
	if p.SessionLimits == nil || *p.SessionLimits != (SessionLimits{NativeStateBytes: 1 << 20, ReplyFrames: 9, FramesPerSecond: 4}) {
		t.Fatalf("decoded %+v", p.SessionLimits)
	}
	b, _ := json.Marshal(p)
	if !strings.Contains(string(b), `"session_limits":{"native_state_bytes":1048576,"reply_frames":9,"frames_per_second":4}`) {
		t.Fatalf("encoded %s", b)
	}
	if err := json.Unmarshal([]byte(`{"session_limits": {"reply_frame": 9}}`), &p); err == nil || !strings.Contains(err.Error(), "reply_frame") {
		t.Fatalf("unknown key: %v", err)
	}
	var bare Profile
	_ = json.Unmarshal([]byte(`{"name": "p"}`), &bare)
	if b, _ := json.Marshal(bare); bare.SessionLimits != nil || strings.Contains(string(b), "session_limits") {
		t.Fatalf("a profile without limits: %s", b)
	}
}
