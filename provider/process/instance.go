package process

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
)

// Instance implements sandbox.Instancer: the harness's directory on this
// host, "process:DIRHASH".
func (p *Provider) Instance(context.Context) (string, error) {
	sum := sha256.Sum256([]byte(p.cfg.Dir))
	return "process:" + hex.EncodeToString(sum[:4]), nil
}
