package app

import (
	"fmt"
	"slices"
	"sort"

	"github.com/astrabox/astrabox/internal/backends"
)

// opensandboxConfigs is the "opensandbox" section of the config file: one
// remote lifecycle service per name, each then a backend of that name (see
// backends.OpenSandboxConfig).
type opensandboxConfigs map[string]*opensandboxConfig

// opensandboxConfig is one remote, with its key once resolved.
type opensandboxConfig struct {
	backends.OpenSandboxConfig

	key string // the resolved API key (resolveKeys)
}

// validate checks every remote's name and section, naming the first it
// refuses.
func (cs opensandboxConfigs) validate() error {
	for _, name := range cs.names() {
		if err := backends.ValidateRemoteName(name); err != nil {
			return err
		}
		key := "opensandbox." + name
		c := cs[name]
		if c == nil {
			return fmt.Errorf("%s: want an object with a url", key)
		}
		if err := c.Validate(key); err != nil {
			return err
		}
	}
	return nil
}

// resolveKeys reads each remote's key from the file or the environment; a
// named variable that is unset or empty is an error.
func (cs opensandboxConfigs) resolveKeys(env Env) error {
	for _, name := range cs.names() {
		c := cs[name]
		k, err := c.ResolveKey("opensandbox."+name, env)
		if err != nil {
			return err
		}
		c.key = k
	}
	return nil
}

// names returns the remotes' names, sorted.
func (cs opensandboxConfigs) names() []string {
	out := make([]string, 0, len(cs))
	for n := range cs {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// installed is the backends this build knows plus the configured remotes.
func (c *serveConfig) installed() []string {
	return append(slices.Clone(backends.Kinds), c.OpenSandbox.names()...)
}

// backendsConfig is the backend part of the config, for
// backends.Config.Open, with the remotes' keys as resolveKeys resolved
// them.
func (c *serveConfig) backendsConfig() backends.Config {
	bc := backends.Config{Native: c.Native, Docker: c.Docker, Kubernetes: c.Kubernetes}
	if len(c.OpenSandbox) > 0 {
		bc.Remotes = make(map[string]backends.OpenSandboxConfig, len(c.OpenSandbox))
		for name, r := range c.OpenSandbox {
			if r != nil {
				remote := r.OpenSandboxConfig
				remote.APIKey, remote.APIKeyEnv = r.key, ""
				bc.Remotes[name] = remote
			}
		}
	}
	return bc
}
