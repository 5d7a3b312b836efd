package app

import (
	"strings"
	"testing"
)

func TestDecodeConfigStrict(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
		native              *nativeConfig // the native section decoded, when not nil
	}{
		{"valid", `{"listen": "127.0.0.1:9000", "docker": {"noPull": true}, "profiles": {"py": {"image": "debian", "idleTimeout": 60}}}`, "", nil},
		{"unknown top-level key", `{"listne": "x"}`, `unknown field "listne"`, nil},
		{"unknown docker key", `{"docker": {"noPul": true}}`, `unknown field "noPul"`, nil},
		{"unknown profile key", `{"profiles": {"py": {"imag": "debian"}}}`, `unknown field "imag"`, nil},
		{"trailing data", `{} {}`, "trailing data", nil},
		{"native section", `{"native": {"network": "10.77.0.0/16", "cgroupParent": "boxes/astrabox"}}`, "",
			&nativeConfig{Network: "10.77.0.0/16", CgroupParent: "boxes/astrabox"}},
		{"native larger range", `{"native": {"network": "10.64.0.0/12"}}`, "", nil},
		{"native cgroup from the root", `{"native": {"cgroupParent": "/astrabox.slice"}}`, "", nil},
		{"unknown native key", `{"native": {"netwrk": "10.77.0.0/16"}}`, `unknown field "netwrk"`, nil},
		{"native network not CIDR", `{"native": {"network": "10.77.0.0"}}`, `native.network "10.77.0.0"`, nil},
		{"native network too small", `{"native": {"network": "10.77.0.0/24"}}`, `native.network "10.77.0.0/24"`, nil},
		{"native network IPv6", `{"native": {"network": "fd00::/8"}}`, `native.network "fd00::/8"`, nil},
		{"native cgroup escapes", `{"native": {"cgroupParent": "../elsewhere"}}`, `native.cgroupParent "../elsewhere"`, nil},
		{"native cgroup root itself", `{"native": {"cgroupParent": "/"}}`, `native.cgroupParent "/"`, nil},
		{"negative reconcile interval", `{"replicas": {"reconcileInterval": -1}}`, "replicas.reconcileInterval", nil},
		{"negative session lease", `{"replicas": {"sessionLease": -1}}`, "replicas.sessionLease", nil},
		{"negative quota", `{"maxSandboxes": -1}`, "maxSandboxes", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(tc.json), &cfg)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decodeConfig = %v, want %q", err, tc.wantErr)
			}
			if tc.native != nil && cfg.Native != *tc.native {
				t.Fatalf("native section %+v, want %+v", cfg.Native, *tc.native)
			}
		})
	}
}
