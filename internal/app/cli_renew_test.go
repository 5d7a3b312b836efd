package app

import (
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/server/servertest"
)

// TestSandboxRenewNeverShortens: `sandbox renew --for D` moves an expiry
// later, and leaves one already later, or none, as it is, saying so.
func TestSandboxRenewNeverShortens(t *testing.T) {
	env := servertest.New(t, servertest.Options{})
	type box struct {
		ID        string     `json:"id"`
		ExpiresAt *time.Time `json:"expiresAt"`
	}
	create := func(body map[string]any) box {
		var b box
		env.Must(202, "POST", "/v1/sandboxes", body, &b)
		return b
	}
	sleep := []string{"sleep", "infinity"}
	for _, tc := range []struct {
		name     string
		create   map[string]any
		lifetime string
		later    bool   // the expiry moves later
		stdout   string // what stdout starts with; "" for the new expiry
		stderr   string
		code     int
		wantNil  bool
	}{
		{"a sooner expiry moves later", map[string]any{"timeout": 600, "entrypoint": sleep}, "2h", true, "", "", 0, false},
		{"a later expiry is kept", map[string]any{"timeout": 7200, "entrypoint": sleep}, "1h", false, "", "already expires at", 0, false},
		{"no expiry is kept", map[string]any{"entrypoint": sleep}, "1h", false, "never", "never expires", 0, true},
		{"a negative lifetime is refused", map[string]any{"timeout": 600, "entrypoint": sleep}, "-5m", false, "", "positive duration", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := create(tc.create)
			r := runCLI(t, env, "", "sandbox", "renew", "--for", tc.lifetime, b.ID)
			if r.code != tc.code || !strings.Contains(r.stderr, tc.stderr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			var after box
			env.Must(200, "GET", "/v1/sandboxes/"+b.ID, nil, &after)
			switch {
			case tc.wantNil:
				if after.ExpiresAt != nil {
					t.Fatalf("a box that never expired now expires at %s", after.ExpiresAt)
				}
			case tc.later:
				if !after.ExpiresAt.After(*b.ExpiresAt) {
					t.Fatalf("expiry %s, want later than %s", after.ExpiresAt, b.ExpiresAt)
				}
			default:
				if !after.ExpiresAt.Equal(*b.ExpiresAt) {
					t.Fatalf("expiry moved from %s to %s", b.ExpiresAt, after.ExpiresAt)
				}
			}
			if r.code != 0 {
				return
			}
			printed := strings.TrimSpace(r.stdout)
			if tc.stdout != "" {
				if printed != tc.stdout {
					t.Fatalf("printed %q, want %q", printed, tc.stdout)
				}
				return
			}
			at, err := time.Parse(time.RFC3339, printed)
			if err != nil || !at.Equal(after.ExpiresAt.Truncate(time.Second)) {
				t.Fatalf("printed %q (%v), want the box's expiry %s", printed, err, after.ExpiresAt)
			}
		})
	}
}
