package api

import (
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

func TestParseExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		in   string
		want time.Time // zero: refused
	}{
		// A lifetime in seconds (AstraBox's form).
		{"1", now.Add(time.Second)},
		{"3600", now.Add(time.Hour)},
		{"604800", now.Add(7 * 24 * time.Hour)},
		// Unix epoch seconds (the specification's form, what the SDKs'
		// getSignedEndpoint sends).
		{"1800003600", time.Unix(1_800_003_600, 0)},
		{"1800604800", time.Unix(1_800_604_800, 0)},
		// Refused: not in the future, more than 7 days ahead, not a count.
		{"1800000000", time.Time{}},
		{"1799999999", time.Time{}},
		{"604801", time.Time{}},
		{"1800604801", time.Time{}},
		{"0", time.Time{}},
		{"-5", time.Time{}},
		{"soon", time.Time{}},
		{"18446744073709551615", time.Time{}},
	}
	for _, tt := range tests {
		got, err := parseExpires(tt.in, now)
		if tt.want.IsZero() {
			if sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
				t.Errorf("parseExpires(%q) = %v, %v; want %s", tt.in, got, err, sandbox.CodeInvalidRequest)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseExpires(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}
