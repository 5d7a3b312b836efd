package app

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

func TestShipyardConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		cfg shipyardConfig
		ok  bool
	}{
		{shipyardConfig{}, true},
		{shipyardConfig{Listen: "127.0.0.1:8114", Credentials: "/var/lib/x/credentials.json"}, true},
		{shipyardConfig{Listen: "8114"}, false},
		{shipyardConfig{Credentials: "relative/credentials.json"}, false},
	} {
		if err := tc.cfg.validate(); (err == nil) != tc.ok {
			t.Errorf("validate(%+v) = %v, want ok %v", tc.cfg, err, tc.ok)
		}
	}
	var cfg serveConfig
	if err := decodeConfig([]byte(`{"shipyard": {"listen": "127.0.0.1:0", "typo": 1}}`), &cfg); err == nil {
		t.Fatal("an unknown key in the shipyard section was accepted")
	}
}

// TestServeShipyard checks the second listener (Bay's routes at its root,
// handed to the API under /shipyard) and the credentials file.
func TestServeShipyard(t *testing.T) {
	var seen string
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.URL.Path })
	dir := t.TempDir()
	creds := filepath.Join(dir, "shipyard", "credentials.json")
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte("ab_key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stop, err := serveShipyard(shipyardConfig{Listen: "127.0.0.1:0", Credentials: creds}, api, "127.0.0.1:8080", "", dir,
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	b, err := os.ReadFile(creds)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]string
	if err := json.Unmarshal(b, &got); err != nil || got["api_key"] != "ab_key" || got["endpoint"] == "" {
		t.Fatalf("credentials.json = %s (%v)", b, err)
	}
	if fi, _ := os.Stat(creds); fi.Mode().Perm() != 0o600 {
		t.Fatalf("credentials.json mode %v", fi.Mode())
	}
	resp, err := http.Get(got["endpoint"] + "/v1/profiles")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if seen != "/shipyard/v1/profiles" {
		t.Fatalf("the API saw %q", seen)
	}
}
