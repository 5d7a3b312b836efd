package app

import (
	"strings"
	"testing"
)

func TestDecodeConfigStrict(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
	}{
		{"valid", `{"listen": "127.0.0.1:9000", "docker": {"noPull": true}, "profiles": {"py": {"image": "debian", "idleTimeout": 60}}}`, ""},
		{"unknown top-level key", `{"listne": "x"}`, `unknown field "listne"`},
		{"unknown docker key", `{"docker": {"noPul": true}}`, `unknown field "noPul"`},
		{"unknown profile key", `{"profiles": {"py": {"imag": "debian"}}}`, `unknown field "imag"`},
		{"trailing data", `{} {}`, "trailing data"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(tc.json), &cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decodeConfig = %v, want %q", err, tc.wantErr)
			}
		})
	}
}
