// Package backends opens the server's sandbox backends: one entry point,
// Config.Open, makes a backend by name from its section of the server
// config and what every backend shares (Env). The sections are the config
// file's format, decoded strictly by whoever reads the file; each has a
// Validate that names the first key it refuses. serve, bench and the test
// server open backends here, so that a backend is built one way.
package backends

import (
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
)

// Kinds are the backends this build knows besides remotes, in the order
// they are listed.
var Kinds = []string{"native", "docker", "kubernetes"}

// reservedNames are the names a remote cannot take: the kinds and the
// test harness.
var reservedNames = append(slices.Clone(Kinds), "process")

// Config is the backend part of the server config: a section per kind and
// the remotes by name. Zero values select the backends' defaults.
type Config struct {
	Native     NativeConfig
	Docker     DockerConfig
	Kubernetes KubernetesConfig
	// Remotes are remote lifecycle services, each a backend of its name.
	// A remote's key is its APIKey: one naming APIKeyEnv is refused by
	// Open, so the caller resolves it first (ResolveKey).
	Remotes map[string]OpenSandboxConfig
}

// Env is what every backend is opened with besides its section.
type Env struct {
	// DataDir is the server's state directory: a backend keeps its state
	// under DataDir/<kind>, and a remote's default owner is derived from
	// it. Required.
	DataDir string
	// Binary is the astrabox binary boxes run (default: the running
	// executable).
	Binary string
	// Images, when set, resolves the native backend's image names other
	// than "host" and keeps its snapshots.
	Images *image.Store
	// VolumesDir is where the native backend keeps named volumes (default:
	// its own data dir's).
	VolumesDir string
	// HostPathRoots are the host directories under which volumes may name
	// host paths (none: host-path volumes are off).
	HostPathRoots []string
	// Egress, when set, serves the native and docker backends' boxes of
	// network limited.
	Egress *egress.Manager
	// Logger receives the backends' logs, with the backend's name
	// (default: discarded).
	Logger *slog.Logger
	// NativeOverride and DockerOverride, when set, change the provider's
	// config after the section and Env are applied and before the
	// provider is made: for tests and benchmarks, which set what the
	// config file cannot.
	NativeOverride func(*native.Config)
	DockerOverride func(*docker.Config)
}

func (e Env) logger(name string) *slog.Logger {
	if e.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return e.Logger.With("backend", name)
}

// Validate checks every section and every remote's name and section,
// naming the first key it refuses. Sections are checked whether or not
// their backend is enabled.
func (c Config) Validate() error {
	if err := c.Native.Validate("native"); err != nil {
		return err
	}
	if err := c.Docker.Validate("docker"); err != nil {
		return err
	}
	if err := c.Kubernetes.Validate("kubernetes"); err != nil {
		return err
	}
	for _, name := range c.RemoteNames() {
		if err := ValidateRemoteName(name); err != nil {
			return err
		}
		r := c.Remotes[name]
		if err := r.Validate("opensandbox." + name); err != nil {
			return err
		}
	}
	return nil
}

// RemoteNames returns the remotes' names, sorted.
func (c Config) RemoteNames() []string {
	out := make([]string, 0, len(c.Remotes))
	for n := range c.Remotes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Installed is the backends Open knows: the kinds, then the remotes.
func (c Config) Installed() []string {
	return append(slices.Clone(Kinds), c.RemoteNames()...)
}

// Open makes the backend name: a kind with its section, or a remote. The
// section is validated first; its error names the key it refuses. The
// caller closes the provider when it implements io.Closer. Open contacts
// nothing beyond what the provider's New does.
func (c Config) Open(name string, env Env) (sandbox.Provider, error) {
	switch name {
	case "native":
		return c.Native.open(env)
	case "docker":
		return c.Docker.open(env)
	case "kubernetes":
		return c.Kubernetes.open(env)
	}
	if r, ok := c.Remotes[name]; ok {
		return r.open(name, env)
	}
	return nil, fmt.Errorf("unknown backend %q (known: %s)", name, strings.Join(c.Installed(), ", "))
}

// Release closes a native or docker backend for a clean stop: it releases
// what no box needs and keeps what boxes do, so that they keep running and
// the next Open re-attaches them. The provider must not be used
// afterwards. Other backends are left as they are and Release returns nil
// for them.
func Release(p sandbox.Provider) error {
	switch bp := p.(type) {
	case *native.Provider:
		return bp.Close()
	case *docker.Provider:
		return bp.Close()
	}
	return nil
}
