package app

import (
	"fmt"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
)

// limitsConfig is the "limits" section of the config file: the most one
// sandbox may ask for, checked on create, on profiles (configured and
// stored), on warm pools' boxes and on renew. An omitted key takes the
// host's value (server.HostLimits): its CPUs, its RAM, the kernel's
// pid_max, the size of the file system holding the data dir. Set them
// explicitly where boxes run on another machine (a remote Docker engine).
type limitsConfig struct {
	// MaxCPU is a CPU quantity as resourceLimits takes it ("8", "7500m").
	MaxCPU string `json:"maxCPU"`
	// MaxMemory and MaxDisk are byte quantities ("64Gi", "500G").
	MaxMemory string `json:"maxMemory"`
	MaxDisk   string `json:"maxDisk"`
	// MaxPIDs bounds the pids limit.
	MaxPIDs int64 `json:"maxPIDs"`
	// MaxTimeout is the longest TTL and idle timeout, and how far ahead a
	// renew may set an expiry, in seconds (default and at most
	// lifecycle.MaxTimeoutCeiling, ten years).
	MaxTimeout int64 `json:"maxTimeout"`
}

// limits returns the section's bounds (zero for omitted keys), or an error
// naming the first key it refuses.
func (c limitsConfig) limits() (lifecycle.Limits, error) {
	var l lifecycle.Limits
	var err error
	if c.MaxCPU != "" {
		if l.MaxMilliCPU, err = api.ParseCPU(c.MaxCPU); err != nil {
			return l, fmt.Errorf("limits.maxCPU: %w", err)
		}
	}
	if c.MaxMemory != "" {
		if l.MaxMemoryBytes, err = api.ParseBytes(c.MaxMemory); err != nil {
			return l, fmt.Errorf("limits.maxMemory: %w", err)
		}
	}
	if c.MaxDisk != "" {
		if l.MaxDiskBytes, err = api.ParseBytes(c.MaxDisk); err != nil {
			return l, fmt.Errorf("limits.maxDisk: %w", err)
		}
	}
	if c.MaxPIDs < 0 {
		return l, fmt.Errorf("limits.maxPIDs must not be negative")
	}
	l.MaxPIDs = c.MaxPIDs
	ceiling := int64(lifecycle.MaxTimeoutCeiling / time.Second)
	if c.MaxTimeout < 0 || c.MaxTimeout > ceiling {
		return l, fmt.Errorf("limits.maxTimeout must be 0 to %d seconds", ceiling)
	}
	l.MaxTimeout = time.Duration(c.MaxTimeout) * time.Second
	if err := l.Validate(); err != nil {
		return l, err
	}
	return l, nil
}

// serverLimits is the section over the host's bounds, dataDir's file system
// giving the disk bound.
func (c limitsConfig) serverLimits(dataDir string) (lifecycle.Limits, error) {
	l, err := c.limits()
	if err != nil {
		return l, err
	}
	return l.WithDefaults(server.HostLimits(dataDir)), nil
}
