package app

import (
	"fmt"
	"path/filepath"

	"github.com/astrabox/astrabox/internal/hostpath"
)

// volumesConfig is the "volumes" section of the config file: where
// sandboxes' volumes may come from.
//
//	"volumes": {"hostPathRoots": ["/srv/astrabox"], "dir": "/var/lib/astrabox/volumes"}
type volumesConfig struct {
	// HostPathRoots are the host directories under which a sandbox's
	// `host` volumes may name paths (absolute, clean, without symbolic
	// links; never "/"). Paths are resolved beneath them without following
	// links; a path under none is refused, naming these. None (the
	// default) disables host-path volumes. Root in a sandbox acts as root
	// on the files under them: allow only directories meant for sandboxes.
	HostPathRoots []string `json:"hostPathRoots"`
	// Dir is where the native backend keeps named volumes (`pvc` claims),
	// a directory per volume (default DATA_DIR/native/volumes). It must be
	// on a file system with idmapped mounts (ext4, xfs, btrfs, tmpfs).
	// The docker backend keeps them as Docker volumes.
	Dir string `json:"dir"`
}

// validate checks the section, naming the key it refuses.
func (c volumesConfig) validate() error {
	if err := hostpath.Roots(c.HostPathRoots).Check(); err != nil {
		return fmt.Errorf("volumes.hostPathRoots: %w", err)
	}
	if c.Dir != "" && (!filepath.IsAbs(c.Dir) || filepath.Clean(c.Dir) != c.Dir) {
		return fmt.Errorf("volumes.dir %q: want an absolute, clean path", c.Dir)
	}
	return nil
}
