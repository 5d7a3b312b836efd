package app

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"sort"

	"github.com/astrabox/astrabox/provider/opensandbox"
	"github.com/astrabox/astrabox/sandbox"
)

// opensandboxConfigs is the "opensandbox" section of the config file: one
// remote lifecycle service (an OpenSandbox deployment, or another
// AstraBox) per name, each then a backend of that name:
//
//	"opensandbox": {"edge": {"url": "http://10.0.0.7:8080", "apiKeyEnv": "EDGE_KEY"}},
//	"backends": ["native", "edge"]
type opensandboxConfigs map[string]*opensandboxConfig

// opensandboxConfig is one remote.
type opensandboxConfig struct {
	// URL is the remote's lifecycle service ("http://host:8080").
	URL string `json:"url"`
	// APIKey is the remote's API key, written into the file. Prefer
	// APIKeyEnv: a key in the file is in every copy of it.
	APIKey string `json:"apiKey,omitempty"`
	// APIKeyEnv names the environment variable that holds the key.
	APIKeyEnv string `json:"apiKeyEnv,omitempty"`
	// Owner labels the boxes this server makes on the remote (default:
	// derived from the data dir and the name). Replicas set the same.
	Owner string `json:"owner,omitempty"`
	// Backend is the remote's backend for the boxes (default: its own).
	Backend string `json:"backend,omitempty"`
	// Isolation is what the remote's boxes give (default container).
	Isolation string `json:"isolation,omitempty"`
	// Endpoint is how execd is reached: auto, proxy, signed or direct.
	Endpoint string `json:"endpoint,omitempty"`

	key string // the resolved API key (resolveKeys)
}

// MarshalJSON writes the section without the key, so that no dump of the
// config (or of an error that quotes it) shows it.
func (c opensandboxConfig) MarshalJSON() ([]byte, error) {
	type plain opensandboxConfig
	out := plain(c)
	if out.APIKey != "" {
		out.APIKey = "[redacted]"
	}
	return json.Marshal(out)
}

// LogValue keeps the key out of structured logs too.
func (c opensandboxConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", c.URL), slog.String("owner", c.Owner), slog.String("backend", c.Backend))
}

// reservedBackendNames are the names a remote cannot take.
var reservedBackendNames = []string{"native", "docker", "kubernetes", "process"}

// validate checks every remote's section, naming the first it refuses.
func (cs opensandboxConfigs) validate() error {
	for _, name := range cs.names() {
		c := cs[name]
		key := "opensandbox." + name
		if slices.Contains(reservedBackendNames, name) || !validBackendName(name) {
			return fmt.Errorf("%s: the name must be 1 to 63 letters, digits, '-' or '_' and not one of %v", key, reservedBackendNames)
		}
		if c == nil {
			return fmt.Errorf("%s: want an object with a url", key)
		}
		if u, err := url.Parse(c.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
			return fmt.Errorf("%s.url %q: want http(s)://host[:port] without credentials", key, c.URL)
		}
		if c.APIKey != "" && c.APIKeyEnv != "" {
			return fmt.Errorf("%s: set apiKey or apiKeyEnv, not both", key)
		}
		switch c.Endpoint {
		case "", opensandbox.EndpointAuto, opensandbox.EndpointProxy, opensandbox.EndpointSigned, opensandbox.EndpointDirect:
		default:
			return fmt.Errorf("%s.endpoint %q: want auto, proxy, signed or direct", key, c.Endpoint)
		}
		switch sandbox.Isolation(c.Isolation) {
		case "", sandbox.IsolationNone, sandbox.IsolationContainer, sandbox.IsolationSandboxed, sandbox.IsolationVM:
		default:
			return fmt.Errorf("%s.isolation %q: want none, container, sandboxed or vm", key, c.Isolation)
		}
	}
	return nil
}

// resolveKeys reads each remote's key from the file or the environment; a
// named variable that is unset or empty is an error.
func (cs opensandboxConfigs) resolveKeys(env Env) error {
	for _, name := range cs.names() {
		c := cs[name]
		c.key = c.APIKey
		if c.APIKeyEnv != "" {
			if c.key = env(c.APIKeyEnv); c.key == "" {
				return fmt.Errorf("opensandbox.%s.apiKeyEnv: $%s is not set", name, c.APIKeyEnv)
			}
		}
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
	return append(slices.Clone(installedBackends), c.OpenSandbox.names()...)
}

// newOpenSandboxBackend makes the remote backend name of cfg.
func newOpenSandboxBackend(name, dataDir string, c *opensandboxConfig, log *slog.Logger) (sandbox.Provider, error) {
	owner := c.Owner
	if owner == "" {
		abs, err := filepath.Abs(dataDir)
		if err != nil {
			return nil, fmt.Errorf("opensandbox %s: %w", name, err)
		}
		sum := sha256.Sum256([]byte(abs + "\x00" + name))
		owner = "astrabox-" + hex.EncodeToString(sum[:4])
	}
	p, err := opensandbox.New(opensandbox.Config{Name: name, URL: c.URL, APIKey: c.key, Owner: owner, Backend: c.Backend,
		Isolation: sandbox.Isolation(c.Isolation), Endpoint: c.Endpoint, Logger: log.With("backend", name)})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func validBackendName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, c := range s {
		ok := c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok || (i == 0 && (c == '-' || c == '_')) {
			return false
		}
	}
	return true
}
