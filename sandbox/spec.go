package sandbox

import (
	"fmt"
	"strings"
	"time"
)

// NetworkMode selects what a sandbox may reach over the network.
type NetworkMode string

const (
	// NetworkNone gives the box loopback only. It is the default.
	NetworkNone NetworkMode = "none"
	// NetworkLimited allows only the destinations in NetworkPolicy.Allow.
	NetworkLimited NetworkMode = "limited"
	// NetworkUnrestricted allows the internet, but never cloud metadata,
	// the host or private ranges.
	NetworkUnrestricted NetworkMode = "unrestricted"
)

// NetworkPolicy is the network a sandbox gets.
type NetworkPolicy struct {
	Mode  NetworkMode `json:"mode"`
	Allow []string    `json:"allow,omitempty"` // host names or CIDRs; only for NetworkLimited
}

// Resources are the limits a backend enforces on a box. Zero means the
// backend's default.
type Resources struct {
	MilliCPU    int64 `json:"milliCpu,omitempty"`    // 1000 = one core
	MemoryBytes int64 `json:"memoryBytes,omitempty"` // RAM (+swap where the backend limits it)
	PIDs        int64 `json:"pids,omitempty"`        // processes and threads
	DiskBytes   int64 `json:"diskBytes,omitempty"`   // writable layer and workspace
}

// WithDefaults returns r with every zero limit taken from d.
func (r Resources) WithDefaults(d Resources) Resources {
	if r.MilliCPU == 0 {
		r.MilliCPU = d.MilliCPU
	}
	if r.MemoryBytes == 0 {
		r.MemoryBytes = d.MemoryBytes
	}
	if r.PIDs == 0 {
		r.PIDs = d.PIDs
	}
	if r.DiskBytes == 0 {
		r.DiskBytes = d.DiskBytes
	}
	return r
}

// Workspace is a persistent volume mounted at Path (default /workspace).
type Workspace struct {
	Volume string `json:"volume"`
	Path   string `json:"path,omitempty"`
}

// Spec is everything a provider needs to create a box.
type Spec struct {
	Image        string            `json:"image"`
	Entrypoint   []string          `json:"entrypoint,omitempty"`
	Env          map[string]string `json:"env,omitempty"`
	Resources    Resources         `json:"resources"`
	Timeout      time.Duration     `json:"timeout,omitempty"`     // TTL; 0 means no expiry
	IdleTimeout  time.Duration     `json:"idleTimeout,omitempty"` // 0 means none
	Network      NetworkPolicy     `json:"network"`
	Capabilities []Capability      `json:"capabilities,omitempty"` // requested; refused at create if missing
	Metadata     map[string]string `json:"metadata,omitempty"`
	Workspace    *Workspace        `json:"workspace,omitempty"`
	// Runtime names the OCI runtime of the box, for backends that offer a
	// choice (Capabilities.Runtimes); empty is the backend's default.
	Runtime string `json:"runtime,omitempty"`
}

// Validate checks the Spec on its own, before any backend sees it, and
// fills defaults (network mode none). Errors carry CodeInvalidRequest.
func (s *Spec) Validate() error {
	if s.Network.Mode == "" {
		s.Network.Mode = NetworkNone
	}
	switch s.Network.Mode {
	case NetworkNone, NetworkUnrestricted:
		if len(s.Network.Allow) > 0 {
			return Errorf(CodeInvalidRequest, "network allow-list needs mode %q", NetworkLimited)
		}
	case NetworkLimited:
	default:
		return Errorf(CodeInvalidRequest, "unknown network mode %q (want none, limited or unrestricted)", s.Network.Mode)
	}
	for k := range s.Env {
		if err := ValidateEnvName(k); err != nil {
			return err
		}
	}
	r := s.Resources
	if r.MilliCPU < 0 || r.MemoryBytes < 0 || r.PIDs < 0 || r.DiskBytes < 0 {
		return Errorf(CodeInvalidRequest, "resource limits must not be negative")
	}
	if s.Timeout < 0 || s.IdleTimeout < 0 {
		return Errorf(CodeInvalidRequest, "timeouts must not be negative")
	}
	if s.Runtime != "" && !validRuntimeName(s.Runtime) {
		return Errorf(CodeInvalidRequest, "invalid runtime name %q (1 to 64 letters, digits, '.', '_' or '-')", s.Runtime)
	}
	for _, c := range s.Capabilities {
		if !c.Known() {
			return Errorf(CodeInvalidRequest, "unknown capability %q (known: %s)", c, strings.Join(capabilityNames(), ", "))
		}
	}
	return nil
}

// ValidateEnvName accepts POSIX-style environment variable names: a letter or
// underscore, then letters, digits and underscores, at most 256 bytes.
func ValidateEnvName(name string) error {
	if name == "" || len(name) > 256 {
		return Errorf(CodeInvalidRequest, "environment variable name must be 1 to 256 bytes")
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')
		if !ok {
			return Errorf(CodeInvalidRequest, "invalid environment variable name %s", fmt.Sprintf("%q", name))
		}
	}
	return nil
}

// validRuntimeName accepts OCI runtime names as engines register them.
func validRuntimeName(name string) bool {
	if len(name) == 0 || len(name) > 64 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '.' || c == '_' || c == '-' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}
