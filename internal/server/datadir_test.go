package server_test

import (
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/internal/server/servertest"
)

// TestOneServerPerDataDir: a server records where it listens, so the CLI
// on the machine finds it on any port; a second server on the same data
// dir is refused with a message naming the first; the record goes when
// the server stops.
func TestOneServerPerDataDir(t *testing.T) {
	p := newServeProcess(t)
	p.start()
	b, err := os.ReadFile(filepath.Join(p.dataDir, "server.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		URL string `json:"url"`
		PID int    `json:"pid"`
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.URL != "http://"+p.addr || rec.PID != p.cmd.Process.Pid {
		t.Fatalf("server.json = %s (%v), want %s of pid %d", b, err, "http://"+p.addr, p.cmd.Process.Pid)
	}

	// The CLI, given no server, finds it on its port (not 8080).
	ls := exec.Command(p.bin, "sandbox", "ls", "--data-dir", p.dataDir)
	ls.Env = append(os.Environ(), "ASTRABOX_API_KEY="+servertest.Key, "ASTRABOX_URL=", "HOME="+t.TempDir(), "XDG_CONFIG_HOME=")
	if out, err := ls.CombinedOutput(); err != nil || !strings.Contains(string(out), "ID") {
		t.Errorf("astrabox sandbox ls without --server: %v\n%s", err, out)
	}

	// A second server on the same data dir is refused, naming the first.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	second := exec.Command(p.bin, "serve", "--listen", addr, "--data-dir", p.dataDir, "--api-key", servertest.Key, "--backends", "native")
	out, err := second.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another astrabox serve") || !strings.Contains(string(out), "http://"+p.addr) {
		t.Errorf("a second server on the data dir: %v\n%s", err, out)
	}

	p.stop()
	if _, err := os.Stat(filepath.Join(p.dataDir, "server.json")); !os.IsNotExist(err) {
		t.Errorf("server.json after the server stopped: %v", err)
	}
}
