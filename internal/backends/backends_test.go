package backends

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// decodeStrict decodes raw into v as the server config's reader does:
// an unknown key is an error naming it.
func decodeStrict(raw string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(raw)))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// section is what every section type offers.
type section interface{ Validate(key string) error }

func TestSectionsDecodeAndValidate(t *testing.T) {
	tests := []struct {
		name, key, json, wantErr string
		into                     func() section
	}{
		{"native valid", "native", `{"network": "10.77.0.0/16", "cgroupParent": "boxes/astrabox"}`, "", func() section { return &NativeConfig{} }},
		{"native unknown key", "native", `{"netwrk": "10.77.0.0/16"}`, `unknown field "netwrk"`, func() section { return &NativeConfig{} }},
		{"native small range", "native", `{"network": "10.77.0.0/24"}`, `native.network "10.77.0.0/24"`, func() section { return &NativeConfig{} }},
		{"native IPv6", "native", `{"network": "fd00::/8"}`, `native.network "fd00::/8"`, func() section { return &NativeConfig{} }},
		{"native cgroup escapes", "native", `{"cgroupParent": "../x"}`, `native.cgroupParent "../x"`, func() section { return &NativeConfig{} }},
		{"docker valid", "docker", `{"host": "unix:///run/d.sock", "runtimes": ["runsc"], "noPull": true, "owner": "o"}`, "", func() section { return &DockerConfig{} }},
		{"docker unknown key", "docker", `{"noPul": true}`, `unknown field "noPul"`, func() section { return &DockerConfig{} }},
		{"kubernetes valid", "kubernetes", `{"execdImage": "x/execd:1", "pullPolicy": "Never", "requestPercent": 50,
			"runtimeClasses": [{"name": "gvisor", "isolation": "sandboxed"}]}`, "", func() section { return &KubernetesConfig{} }},
		{"kubernetes unknown key", "kubernetes", `{"kubeconfigPath": "/k"}`, `unknown field "kubeconfigPath"`, func() section { return &KubernetesConfig{} }},
		{"kubernetes pull policy", "kubernetes", `{"pullPolicy": "Always"}`, `kubernetes.pullPolicy "Always"`, func() section { return &KubernetesConfig{} }},
		{"kubernetes request percent", "kubernetes", `{"requestPercent": 101}`, "kubernetes.requestPercent 101", func() section { return &KubernetesConfig{} }},
		{"kubernetes start timeout", "kubernetes", `{"startTimeout": -1}`, "kubernetes.startTimeout", func() section { return &KubernetesConfig{} }},
		{"kubernetes class name", "kubernetes", `{"runtimeClasses": [{}]}`, "kubernetes.runtimeClasses[0].name", func() section { return &KubernetesConfig{} }},
		{"kubernetes class isolation", "kubernetes", `{"runtimeClasses": [{"name": "x", "isolation": "strong"}]}`,
			"kubernetes.runtimeClasses[0].isolation", func() section { return &KubernetesConfig{} }},
		{"remote valid", "opensandbox.edge", `{"url": "https://edge:8443", "apiKeyEnv": "K", "endpoint": "proxy", "isolation": "vm"}`, "",
			func() section { return &OpenSandboxConfig{} }},
		{"remote unknown key", "opensandbox.edge", `{"url": "http://h:1", "apiKy": "a"}`, `unknown field "apiKy"`, func() section { return &OpenSandboxConfig{} }},
		{"remote url", "opensandbox.edge", `{"url": "h:1"}`, `opensandbox.edge.url "h:1"`, func() section { return &OpenSandboxConfig{} }},
		{"remote credentials in url", "opensandbox.edge", `{"url": "http://u:p@h:1"}`, "opensandbox.edge.url", func() section { return &OpenSandboxConfig{} }},
		{"remote both keys", "opensandbox.edge", `{"url": "http://h:1", "apiKey": "a", "apiKeyEnv": "K"}`, "opensandbox.edge: set apiKey or apiKeyEnv, not both",
			func() section { return &OpenSandboxConfig{} }},
		{"remote endpoint", "opensandbox.edge", `{"url": "http://h:1", "endpoint": "tcp"}`, `opensandbox.edge.endpoint "tcp"`, func() section { return &OpenSandboxConfig{} }},
		{"remote isolation", "opensandbox.edge", `{"url": "http://h:1", "isolation": "strong"}`, `opensandbox.edge.isolation "strong"`,
			func() section { return &OpenSandboxConfig{} }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.into()
			err := decodeStrict(tc.json, s)
			if err == nil {
				err = s.Validate(tc.key)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decode and validate = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestValidateRemoteName(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"edge", true}, {"edge-2_b", true}, {"", false}, {"-edge", false}, {"a/b", false},
		{"native", false}, {"docker", false}, {"kubernetes", false}, {"process", false}, {strings.Repeat("a", 64), false},
	} {
		err := ValidateRemoteName(tc.name)
		if (err == nil) != tc.ok || err != nil && !strings.Contains(err.Error(), "opensandbox."+tc.name+": the name") {
			t.Errorf("ValidateRemoteName(%q) = %v, want ok %v", tc.name, err, tc.ok)
		}
	}
}

func TestResolveKey(t *testing.T) {
	env := func(k string) string {
		if k == "EDGE_KEY" {
			return "from-env"
		}
		return ""
	}
	for _, tc := range []struct {
		name          string
		c             OpenSandboxConfig
		getenv        func(string) string
		want, wantErr string
	}{
		{"in file", OpenSandboxConfig{APIKey: "k1"}, env, "k1", ""},
		{"none", OpenSandboxConfig{}, env, "", ""},
		{"from env", OpenSandboxConfig{APIKeyEnv: "EDGE_KEY"}, env, "from-env", ""},
		{"unset", OpenSandboxConfig{APIKeyEnv: "NOPE"}, env, "", "opensandbox.edge.apiKeyEnv: $NOPE is not set"},
		{"no environment", OpenSandboxConfig{APIKeyEnv: "EDGE_KEY"}, nil, "", "$EDGE_KEY is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.ResolveKey("opensandbox.edge", tc.getenv)
			if got != tc.want || tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("ResolveKey = %q, %v; want %q, %q", got, err, tc.want, tc.wantErr)
			}
		})
	}
}

// TestOpenRefusesBeforeContacting: Open names what it refuses without
// reaching an engine, a cluster or a remote.
func TestOpenRefusesBeforeContacting(t *testing.T) {
	env := Env{DataDir: t.TempDir()}
	for _, tc := range []struct {
		name, backend, wantErr string
		c                      Config
	}{
		{"unknown", "nope", `unknown backend "nope" (known: native, docker, kubernetes, edge)`,
			Config{Remotes: map[string]OpenSandboxConfig{"edge": {URL: "http://h:1"}}}},
		{"no execd image", "kubernetes", "kubernetes.execdImage", Config{Kubernetes: KubernetesConfig{Kubeconfig: "/nonexistent"}}},
		{"invalid section", "kubernetes", "kubernetes.pullPolicy", Config{Kubernetes: KubernetesConfig{ExecdImage: "x", PullPolicy: "Always"}}},
		{"invalid remote", "edge", "opensandbox.edge.url", Config{Remotes: map[string]OpenSandboxConfig{"edge": {URL: "ftp://h"}}}},
		{"unresolved key", "edge", "opensandbox.edge.apiKeyEnv", Config{Remotes: map[string]OpenSandboxConfig{"edge": {URL: "http://h:1", APIKeyEnv: "K"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.c.Open(tc.backend, env)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Open = %v, %v; want an error naming %q", p, err, tc.wantErr)
			}
		})
	}
}

func TestConfigValidateAndInstalled(t *testing.T) {
	c := Config{Remotes: map[string]OpenSandboxConfig{"b": {URL: "http://h:1"}, "a": {URL: "http://h:2"}}}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Installed(), ","); got != "native,docker,kubernetes,a,b" {
		t.Fatalf("Installed = %s", got)
	}
	c.Remotes["process"] = OpenSandboxConfig{URL: "http://h:3"}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "opensandbox.process: the name") {
		t.Fatalf("Validate = %v, want the reserved name refused", err)
	}
	c = Config{Native: NativeConfig{Network: "10.0.0.0/24"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "native.network") {
		t.Fatalf("Validate = %v, want native.network refused", err)
	}
}

// TestRemoteKeyRedacted: a dump of a remote's section never shows its key.
func TestRemoteKeyRedacted(t *testing.T) {
	b, err := json.Marshal(map[string]OpenSandboxConfig{"edge": {URL: "http://h:1", APIKey: "s3cret-key"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("dump %s", b)
	}
}
