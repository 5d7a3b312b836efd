package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// A server records where it listens in its data dir (localServerFile), so
// that the CLI on the same machine finds it on whatever port it was
// given; the record is removed when the server stops.

// localServerFile is the record of a running server in its data dir.
const localServerFile = "server.json"

// localServerRecord is what localServerFile holds.
type localServerRecord struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// recordLocalServer writes where the server of dataDir listens (addr, a
// listener's address; an unspecified host becomes 127.0.0.1) and returns
// what removes the record.
func recordLocalServer(dataDir, addr string) (func(), error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("record the server's address: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	rec := localServerRecord{URL: "http://" + net.JoinHostPort(host, port), PID: os.Getpid()}
	b, _ := json.Marshal(rec)
	path := filepath.Join(dataDir, localServerFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("record the server's address: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, fmt.Errorf("record the server's address: %w", err)
	}
	return func() {
		if cur, ok := readLocalServer(dataDir); ok && cur.PID == rec.PID {
			_ = os.Remove(path)
		}
	}, nil
}

// readLocalServer returns the record of the server of dataDir when that
// server's process still runs.
func readLocalServer(dataDir string) (localServerRecord, bool) {
	b, err := os.ReadFile(filepath.Join(dataDir, localServerFile))
	if err != nil {
		return localServerRecord{}, false
	}
	var rec localServerRecord
	if json.Unmarshal(b, &rec) != nil || rec.PID <= 0 || !strings.HasPrefix(rec.URL, "http://") {
		return localServerRecord{}, false
	}
	if err := syscall.Kill(rec.PID, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return localServerRecord{}, false // gone: the record is stale
	}
	return rec, true
}

// localServerURL is where the CLI finds the server of dataDir: the
// address it recorded, else defaultServer.
func localServerURL(dataDir string) string {
	if rec, ok := readLocalServer(dataDir); ok {
		return rec.URL
	}
	return defaultServer
}
