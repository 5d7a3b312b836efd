package app

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
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
		{"oidc", `{"auth": {"oidc": {"issuer": "https://idp.example", "clientId": "astrabox", "adminGroups": ["ops"], "defaultRole": "viewer"}, "maxKeyLifetime": 7776000}}`, "", nil},
		{"oidc issuer not a URL", `{"auth": {"oidc": {"issuer": "idp.example", "clientId": "a"}}}`, "auth.oidc.issuer", nil},
		{"oidc without client", `{"auth": {"oidc": {"issuer": "https://idp.example"}}}`, "auth.oidc.clientId", nil},
		{"oidc redirect elsewhere", `{"auth": {"oidc": {"issuer": "https://idp.example", "clientId": "a", "redirectUrl": "https://evil.example/steal"}}}`, "auth.oidc.redirectUrl", nil},
		{"oidc admin by default", `{"auth": {"oidc": {"issuer": "https://idp.example", "clientId": "a", "defaultRole": "admin"}}}`, "auth.oidc.defaultRole", nil},
		{"unknown oidc key", `{"auth": {"oidc": {"issuer": "https://idp.example", "client": "a"}}}`, `unknown field "client"`, nil},
		{"gateway", `{"auth": {"gateway": {"secret": "0123456789abcdef", "groupsHeader": "X-Groups", "adminGroups": ["ops"]}}}`, "", nil},
		{"gateway admin by default", `{"auth": {"gateway": {"defaultRole": "admin"}}}`, "auth.gateway.defaultRole", nil},
		{"negative key lifetime", `{"auth": {"maxKeyLifetime": -1}}`, "auth.maxKeyLifetime", nil},
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

func TestLimitsConfig(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
		want                lifecycle.Limits // when no error
	}{
		{"all keys", `{"limits": {"maxCPU": "4", "maxMemory": "16Gi", "maxPIDs": 4096, "maxDisk": "100Gi", "maxTimeout": 86400}}`, "",
			lifecycle.Limits{MaxMilliCPU: 4000, MaxMemoryBytes: 16 << 30, MaxPIDs: 4096, MaxDiskBytes: 100 << 30, MaxTimeout: 24 * time.Hour}},
		{"millicores", `{"limits": {"maxCPU": "1500m"}}`, "", lifecycle.Limits{MaxMilliCPU: 1500}},
		{"omitted", `{}`, "", lifecycle.Limits{}},
		{"unknown key", `{"limits": {"maxGPU": 1}}`, `unknown field "maxGPU"`, lifecycle.Limits{}},
		{"bad cpu", `{"limits": {"maxCPU": "lots"}}`, "limits.maxCPU", lifecycle.Limits{}},
		{"bad memory", `{"limits": {"maxMemory": "-1Gi"}}`, "limits.maxMemory", lifecycle.Limits{}},
		{"memory below the minimum", `{"limits": {"maxMemory": "1Mi"}}`, "maxMemory (bytes) 1048576 is below the minimum", lifecycle.Limits{}},
		{"negative pids", `{"limits": {"maxPIDs": -1}}`, "limits.maxPIDs", lifecycle.Limits{}},
		{"timeout beyond the ceiling", `{"limits": {"maxTimeout": 4611686018427387904}}`, "limits.maxTimeout must be 0 to 315360000 seconds", lifecycle.Limits{}},
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
			if got, _ := cfg.Limits.limits(); got != tc.want {
				t.Fatalf("limits %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestServerLimitsDefaultToTheHost checks that omitted bounds are the
// host's (pid_max, RAM, CPUs, the data dir's file system) and set ones
// win.
func TestServerLimitsDefaultToTheHost(t *testing.T) {
	dir := t.TempDir()
	pidMax, err := procfs.PIDMax()
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	mem, _ := procfs.MemTotal()
	got, err := limitsConfig{MaxPIDs: 64}.serverLimits(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxPIDs != 64 || got.MaxMilliCPU != int64(runtime.NumCPU())*1000 || got.MaxMemoryBytes != mem || got.MaxDiskBytes <= 0 {
		t.Fatalf("limits %+v (pid_max %d, memory %d)", got, pidMax, mem)
	}
	if got, _ := (limitsConfig{}).serverLimits(dir); got.MaxPIDs != pidMax {
		t.Fatalf("default maxPIDs %d, want pid_max %d", got.MaxPIDs, pidMax)
	}
}

func TestHTTPConfig(t *testing.T) {
	tests := []struct {
		name, json, wantErr string
		want                server.HTTPLimits
		metricsKey          bool
	}{
		{"all keys", `{"http": {"metricsRequireKey": true, "readHeaderTimeout": 5, "bodyReadTimeout": 20, "idleTimeout": 60, "maxConnections": 100, "maxConnectionsPerIP": 10}}`, "",
			server.HTTPLimits{ReadHeaderTimeout: 5 * time.Second, BodyReadTimeout: 20 * time.Second, IdleTimeout: time.Minute, MaxConnections: 100, MaxConnectionsPerIP: 10}, true},
		{"off", `{"http": {"maxConnectionsPerIP": -1}}`, "", server.HTTPLimits{MaxConnectionsPerIP: -1}, false},
		{"omitted", `{}`, "", server.HTTPLimits{}, false},
		{"unknown key", `{"http": {"readTimeout": 5}}`, `unknown field "readTimeout"`, server.HTTPLimits{}, false},
		{"negative", `{"http": {"bodyReadTimeout": -2}}`, "http.bodyReadTimeout", server.HTTPLimits{}, false},
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
			if got, _ := cfg.HTTP.limits(); got != tc.want || cfg.HTTP.MetricsRequireKey != tc.metricsKey {
				t.Fatalf("http %+v (metrics key %v), want %+v", got, cfg.HTTP.MetricsRequireKey, tc.want)
			}
		})
	}
}

// TestServeEndpointDomain: --endpoint-domain (or "endpointDomain") must be
// a DNS name, with an optional port, that the API's public host does not
// lie under (every host there is a sandbox's).
func TestServeEndpointDomain(t *testing.T) {
	var cfg serveConfig
	if err := decodeConfig([]byte(`{"endpointDomain": "box.example.com"}`), &cfg); err != nil || cfg.EndpointDomain != "box.example.com" {
		t.Fatalf("decodeConfig = %+v, %v", cfg.EndpointDomain, err)
	}
	tests := []struct {
		domain, publicHost, wantErr string
	}{
		{"", "", ""},
		{"", "api.example.com", ""},
		{"box.example.com", "", ""},
		{"box.example.com", "api.example.com:443", ""},
		{"box.localhost:8080", "127.0.0.1:8080", ""},
		{"example.com", "example.com", ""},
		{"box.example.com", "console.box.example.com", "lies under it"},
		{"example.com", "API.Example.com:8080", "lies under it"},
		{"https://box.example.com", "", "--endpoint-domain"},
		{"10.0.0.1", "", "IP address"},
	}
	for _, tt := range tests {
		err := checkEndpointDomain(tt.domain, tt.publicHost)
		if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("checkEndpointDomain(%q, %q) = %v, want %q", tt.domain, tt.publicHost, err, tt.wantErr)
		}
	}
}
