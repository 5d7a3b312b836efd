package docker

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// Instance implements sandbox.Instancer: the engine's ID and the owner
// label, "docker:ENGINE_ID:OWNER". Replicas that share an engine and set
// the same Config.Owner serve one instance (one of them reconciles it at a
// time); another owner on the same engine is another instance. The name
// is asked of the engine once; a failure is retried at the next call.
func (p *Provider) Instance(ctx context.Context) (string, error) {
	p.instanceMu.Lock()
	defer p.instanceMu.Unlock()
	if p.instance != "" {
		return p.instance, nil
	}
	info, err := p.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return "", fmt.Errorf("docker engine info: %w", err)
	}
	p.instance = "docker:" + info.Info.ID + ":" + p.cfg.Owner
	return p.instance, nil
}
