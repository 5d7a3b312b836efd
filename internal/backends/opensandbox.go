package backends

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"

	"github.com/astrabox/astrabox/provider/opensandbox"
	"github.com/astrabox/astrabox/sandbox"
)

// OpenSandboxConfig is one remote of the "opensandbox" section of the
// server config: a remote lifecycle service (an OpenSandbox deployment,
// or another AstraBox), a backend of the name it is listed under:
//
//	"opensandbox": {"edge": {"url": "http://10.0.0.7:8080", "apiKeyEnv": "EDGE_KEY"}},
//	"backends": ["native", "edge"]
type OpenSandboxConfig struct {
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
}

// MarshalJSON writes the section without the key, so that no dump of the
// config (or of an error that quotes it) shows it.
func (c OpenSandboxConfig) MarshalJSON() ([]byte, error) {
	type plain OpenSandboxConfig
	out := plain(c)
	if out.APIKey != "" {
		out.APIKey = "[redacted]"
	}
	return json.Marshal(out)
}

// LogValue keeps the key out of structured logs too.
func (c OpenSandboxConfig) LogValue() slog.Value {
	return slog.GroupValue(slog.String("url", c.URL), slog.String("owner", c.Owner), slog.String("backend", c.Backend))
}

// ValidateRemoteName refuses a remote's name that is not 1 to 63 letters,
// digits, '-' or '_' (not starting with either) or that is a kind's or
// the test harness's.
func ValidateRemoteName(name string) error {
	if slices.Contains(reservedNames, name) || !validName(name) {
		return fmt.Errorf("opensandbox.%s: the name must be 1 to 63 letters, digits, '-' or '_' and not one of %v", name, reservedNames)
	}
	return nil
}

// Validate checks the remote's values; its error names the key it
// refuses, under key ("opensandbox.NAME").
func (c OpenSandboxConfig) Validate(key string) error {
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
	return nil
}

// ResolveKey returns the remote's API key: APIKey, or the variable
// APIKeyEnv names read with getenv (nil reads none). A named variable that
// is unset or empty is an error naming apiKeyEnv (under key).
func (c OpenSandboxConfig) ResolveKey(key string, getenv func(string) string) (string, error) {
	if c.APIKeyEnv == "" {
		return c.APIKey, nil
	}
	var v string
	if getenv != nil {
		v = getenv(c.APIKeyEnv)
	}
	if v == "" {
		return "", fmt.Errorf("%s.apiKeyEnv: $%s is not set", key, c.APIKeyEnv)
	}
	return v, nil
}

// open makes the remote backend name; a section still naming APIKeyEnv
// is refused (nothing here reads the environment). Its owner defaults to one derived
// from env.DataDir and the name.
func (c OpenSandboxConfig) open(name string, env Env) (sandbox.Provider, error) {
	key := "opensandbox." + name
	if err := ValidateRemoteName(name); err != nil {
		return nil, err
	}
	if err := c.Validate(key); err != nil {
		return nil, err
	}
	apiKey, err := c.ResolveKey(key, nil)
	if err != nil {
		return nil, err
	}
	owner := c.Owner
	if owner == "" {
		abs, err := filepath.Abs(env.DataDir)
		if err != nil {
			return nil, fmt.Errorf("opensandbox %s: %w", name, err)
		}
		sum := sha256.Sum256([]byte(abs + "\x00" + name))
		owner = "astrabox-" + hex.EncodeToString(sum[:4])
	}
	p, err := opensandbox.New(opensandbox.Config{Name: name, URL: c.URL, APIKey: apiKey, Owner: owner, Backend: c.Backend,
		Isolation: sandbox.Isolation(c.Isolation), Endpoint: c.Endpoint, Logger: env.logger(name)})
	if err != nil {
		return nil, err
	}
	return p, nil
}

func validName(s string) bool {
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
