package app

import (
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/server"
)

// httpConfig is the "http" section of the config file: what the server
// answers without the API key, and the bounds of its connections. Omitted
// keys take the defaults (server.HTTPLimits); -1 turns a bound off.
type httpConfig struct {
	// MetricsRequireKey answers /metrics only to requests with the API key
	// (default false: open, for scrapers). /readyz detail always needs it.
	MetricsRequireKey bool `json:"metricsRequireKey"`
	// ReadHeaderTimeout, BodyReadTimeout and IdleTimeout are seconds
	// (defaults 10, 30, 120). The body timeout does not apply to the
	// sandbox proxy (uploads, WebSockets).
	ReadHeaderTimeout int `json:"readHeaderTimeout"`
	BodyReadTimeout   int `json:"bodyReadTimeout"`
	IdleTimeout       int `json:"idleTimeout"`
	// MaxConnections and MaxConnectionsPerIP bound the connections open
	// at once, in all and from one client address (defaults 4096, 256).
	MaxConnections      int `json:"maxConnections"`
	MaxConnectionsPerIP int `json:"maxConnectionsPerIP"`
}

// limits returns the section as server.HTTPLimits, or an error naming
// the first key it refuses.
func (c httpConfig) limits() (server.HTTPLimits, error) {
	for _, v := range []struct {
		key string
		val int
	}{
		{"readHeaderTimeout", c.ReadHeaderTimeout}, {"bodyReadTimeout", c.BodyReadTimeout}, {"idleTimeout", c.IdleTimeout},
		{"maxConnections", c.MaxConnections}, {"maxConnectionsPerIP", c.MaxConnectionsPerIP},
	} {
		if v.val < -1 {
			return server.HTTPLimits{}, fmt.Errorf("http.%s must be positive, 0 (the default) or -1 (no bound)", v.key)
		}
	}
	sec := func(n int) time.Duration { return time.Duration(n) * time.Second }
	return server.HTTPLimits{ReadHeaderTimeout: sec(c.ReadHeaderTimeout), BodyReadTimeout: sec(c.BodyReadTimeout),
		IdleTimeout: sec(c.IdleTimeout), MaxConnections: c.MaxConnections, MaxConnectionsPerIP: c.MaxConnectionsPerIP}, nil
}

// checkEndpointDomain checks --endpoint-domain (empty: none) against
// --public-host: the API's host must not lie under the endpoint domain,
// whose every host is served by the sandbox proxy only.
func checkEndpointDomain(domain, publicHost string) error {
	if domain == "" {
		return nil
	}
	host, _, err := api.ParseEndpointDomain(domain)
	if err != nil {
		return fmt.Errorf("--endpoint-domain: %w", err)
	}
	if publicHost == "" {
		return nil
	}
	ph := publicHost
	if h, _, err := net.SplitHostPort(ph); err == nil {
		ph = h
	}
	ph = strings.TrimSuffix(strings.ToLower(ph), ".")
	if strings.HasSuffix(ph, "."+host) {
		return fmt.Errorf("--endpoint-domain %q: the public host %q lies under it, and every host there is a sandbox's; give the endpoints a domain of their own", domain, publicHost)
	}
	return nil
}
