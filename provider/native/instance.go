package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
)

// Instance implements sandbox.Instancer: this host (its machine id, else
// its host name) and the backend's data dir, "native:HOST:DIRHASH". Only
// the replica on this host serves it.
func (p *Provider) Instance(context.Context) (string, error) {
	host := ""
	if b, err := os.ReadFile("/etc/machine-id"); err == nil {
		host = strings.TrimSpace(string(b))
	}
	if host == "" {
		host, _ = os.Hostname()
	}
	if len(host) > 16 {
		host = host[:16]
	}
	sum := sha256.Sum256([]byte(p.cfg.DataDir))
	return "native:" + host + ":" + hex.EncodeToString(sum[:4]), nil
}
