package app

import (
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
)

// egressConfig is the "egress" section of the config file: the egress
// proxy of network mode limited (package egress).
type egressConfig struct {
	// AllowRanges opt CIDR ranges back in that the proxy otherwise refuses
	// whatever the rules say (private, link-local, loopback, the host's own
	// addresses): a box's rules must still allow them.
	AllowRanges []string `json:"allowRanges"`
}

func (c egressConfig) validate() error {
	_, err := c.ranges()
	return err
}

func (c egressConfig) ranges() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range c.AllowRanges {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("egress.allowRanges %q: want CIDR notation", s)
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

// newEgress makes the server's egress proxy manager: names resolved with
// the host's resolver, its TLS-interception CA kept in DATA_DIR/egress.
// The caller closes it when the server stops, which closes every box's
// proxy (boxes of mode limited then reach nothing until a server is back).
func newEgress(c egressConfig, dataDir string, log *slog.Logger) (*egress.Manager, error) {
	ranges, err := c.ranges()
	if err != nil {
		return nil, err
	}
	ca, err := trust.LoadOrCreateCA(filepath.Join(dataDir, "egress"))
	if err != nil {
		return nil, err
	}
	return egress.NewManager(egress.Config{AllowRanges: ranges, CA: ca, Logger: log.With("component", "egress")}), nil
}
