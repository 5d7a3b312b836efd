package backends

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
)

// NativeConfig is the "native" section of the server config.
type NativeConfig struct {
	// Network is the IPv4 range, /16 or larger, that boxes with network
	// unrestricted are addressed from (default native.DefaultNetwork). It
	// must not overlap a network the host uses.
	Network string `json:"network"`
	// CgroupParent is the cgroup, relative to the cgroup root, that boxes
	// are created under (default "astrabox-" and a hash of the data dir,
	// so that servers with different data dirs keep apart).
	CgroupParent string `json:"cgroupParent"`
}

// Validate checks the section's values; its error names the key it
// refuses, under key (the section's key in the config file).
func (c NativeConfig) Validate(key string) error {
	if n := c.Network; n != "" {
		p, err := netip.ParsePrefix(n)
		if err != nil || !p.Addr().Is4() || p.Bits() > 16 {
			return fmt.Errorf("%s.network %q: want an IPv4 range in CIDR notation, /16 or larger", key, n)
		}
	}
	if g := c.CgroupParent; g != "" && !filepath.IsLocal(strings.TrimPrefix(g, "/")) {
		return fmt.Errorf("%s.cgroupParent %q: want a cgroup path within the cgroup root", key, g)
	}
	return nil
}

// open makes the native backend, with its state under env.DataDir/native.
// It needs root.
func (c NativeConfig) open(env Env) (sandbox.Provider, error) {
	if err := c.Validate("native"); err != nil {
		return nil, err
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the native backend needs root (it creates namespaces and cgroups): run as root")
	}
	cfg := native.Config{DataDir: filepath.Join(env.DataDir, "native"), Binary: env.Binary, Network: c.Network,
		CgroupParent: c.CgroupParent, VolumesDir: env.VolumesDir, HostPathRoots: env.HostPathRoots, Logger: env.logger("native")}
	if env.Images != nil {
		cfg.Images, cfg.Snapshots = env.Images.Resolve, nativeSnapshots(env.Images)
	}
	if env.Egress != nil {
		cfg.Egress = env.Egress
	}
	if env.NativeOverride != nil {
		env.NativeOverride(&cfg)
	}
	p, err := native.New(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}

// nativeSnapshots keeps the native backend's snapshots in the image
// store, as images derived from the box's image.
func nativeSnapshots(images *image.Store) *native.SnapshotStore {
	return &native.SnapshotStore{
		Derive: func(ctx context.Context, name, base string, upper int, uidBase uint32, maxBytes int64, labels map[string]string) error {
			_, err := images.Derive(ctx, name, base, upper, image.DeriveOptions{UIDBase: uidBase, MaxBytes: maxBytes, Labels: labels})
			return err
		},
		Labels: func(ctx context.Context) (map[string]map[string]string, error) {
			list, err := images.List(ctx)
			if err != nil {
				return nil, err
			}
			out := map[string]map[string]string{}
			for _, info := range list {
				if len(info.Labels) > 0 {
					out[info.Name] = info.Labels
				}
			}
			return out, nil
		},
		Remove: images.Remove,
	}
}
