package backends

import (
	"path/filepath"

	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
)

// DockerConfig is the "docker" section of the server config.
type DockerConfig struct {
	// Host is the engine ("unix:///var/run/docker.sock", "tcp://..."; by
	// default DOCKER_HOST or the local socket).
	Host string `json:"host"`
	// Runtime is the OCI runtime of boxes (runc, runsc, kata-runtime, ...).
	Runtime string `json:"runtime"`
	// Runtimes are further runtimes profiles may choose ("runtime").
	Runtimes []string `json:"runtimes"`
	// ReadonlyRootfs keeps the image read-only, so the disk limit holds.
	ReadonlyRootfs bool `json:"readonlyRootfs"`
	// NoPull refuses images the engine does not hold.
	NoPull bool `json:"noPull"`
	// AllowRegistries are registries on private, loopback or link-local
	// addresses that pulls may reach ("registry.internal:5000").
	AllowRegistries []string `json:"allowRegistries"`
	// Owner labels everything the backend creates. Replicas sharing an
	// engine set the same owner, so that they serve one backend instance
	// (default: derived from the data dir, a server of its own).
	Owner string `json:"owner"`
}

// Validate checks the section's values; its error names the key it
// refuses, under key. Every value is checked by the engine client or the
// engine when the backend is opened or used, so none is refused here.
func (c DockerConfig) Validate(key string) error { return nil }

// open makes the docker backend, with its host state under
// env.DataDir/docker; the engine client also reads DOCKER_HOST and the
// other DOCKER_* variables, which Host overrides.
func (c DockerConfig) open(env Env) (sandbox.Provider, error) {
	if err := c.Validate("docker"); err != nil {
		return nil, err
	}
	cfg := docker.Config{DataDir: filepath.Join(env.DataDir, "docker"), Binary: env.Binary, FromEnv: true, Host: c.Host,
		Runtime: c.Runtime, Runtimes: c.Runtimes, ReadonlyRootfs: c.ReadonlyRootfs, NoPull: c.NoPull, Owner: c.Owner,
		AllowRegistries: c.AllowRegistries, HostPathRoots: env.HostPathRoots, Logger: env.logger("docker")}
	if env.Egress != nil {
		cfg.Egress = env.Egress
	}
	if env.DockerOverride != nil {
		env.DockerOverride(&cfg)
	}
	p, err := docker.New(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
