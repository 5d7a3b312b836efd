package app

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestOpenSandboxConfig(t *testing.T) {
	env := func(k string) string {
		if k == "EDGE_KEY" {
			return "from-env"
		}
		return ""
	}
	tests := []struct {
		name, json, wantErr string
		wantKey             string // the resolved key of "edge", when no error
	}{
		{"key in file", `{"opensandbox": {"edge": {"url": "http://10.0.0.7:8080", "apiKey": "k1"}}, "backends": ["native", "edge"]}`, "", "k1"},
		{"key from env", `{"opensandbox": {"edge": {"url": "https://edge.example:8443", "apiKeyEnv": "EDGE_KEY", "owner": "plat-1", "backend": "docker", "endpoint": "proxy", "isolation": "vm"}}}`, "", "from-env"},
		{"no key", `{"opensandbox": {"edge": {"url": "http://h:1"}}}`, "", ""},
		{"unset env", `{"opensandbox": {"edge": {"url": "http://h:1", "apiKeyEnv": "NOPE"}}}`, "$NOPE is not set", ""},
		{"both keys", `{"opensandbox": {"edge": {"url": "http://h:1", "apiKey": "a", "apiKeyEnv": "EDGE_KEY"}}}`, "not both", ""},
		{"unknown key", `{"opensandbox": {"edge": {"url": "http://h:1", "apiKy": "a"}}}`, `unknown field "apiKy"`, ""},
		{"bad url", `{"opensandbox": {"edge": {"url": "h:1"}}}`, `opensandbox.edge.url "h:1"`, ""},
		{"credentials in url", `{"opensandbox": {"edge": {"url": "http://u:p@h:1"}}}`, "opensandbox.edge.url", ""},
		{"reserved name", `{"opensandbox": {"native": {"url": "http://h:1"}}}`, "opensandbox.native: the name", ""},
		{"bad name", `{"opensandbox": {"a/b": {"url": "http://h:1"}}}`, "opensandbox.a/b: the name", ""},
		{"null section", `{"opensandbox": {"edge": null}}`, "want an object", ""},
		{"bad endpoint", `{"opensandbox": {"edge": {"url": "http://h:1", "endpoint": "tcp"}}}`, `endpoint "tcp"`, ""},
		{"bad isolation", `{"opensandbox": {"edge": {"url": "http://h:1", "isolation": "strong"}}}`, `isolation "strong"`, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg serveConfig
			err := decodeConfig([]byte(tc.json), &cfg)
			if err == nil {
				err = cfg.OpenSandbox.resolveKeys(env)
			}
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("decode = %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr != "" {
				return
			}
			if got := cfg.OpenSandbox["edge"].key; got != tc.wantKey {
				t.Fatalf("key %q, want %q", got, tc.wantKey)
			}
			if !slices.Contains(cfg.installed(), "edge") || !slices.Contains(cfg.installed(), "native") {
				t.Fatalf("installed %v lacks edge or native", cfg.installed())
			}
		})
	}
}

// TestOpenSandboxConfigRedacted: a dump of the config never shows a key.
func TestOpenSandboxConfigRedacted(t *testing.T) {
	var cfg serveConfig
	if err := decodeConfig([]byte(`{"opensandbox": {"edge": {"url": "http://h:1", "apiKey": "s3cret-key"}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	_ = cfg.OpenSandbox.resolveKeys(func(string) string { return "" })
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "s3cret") || !strings.Contains(string(b), "[redacted]") {
		t.Fatalf("dump %s", b)
	}
}
