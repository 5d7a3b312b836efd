package sandbox

import (
	"context"
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
//
// In mode NetworkLimited the box's only way out is AstraBox's egress
// proxy, which decides each connection by Rules, in order (the first rule
// whose target matches wins), then Allow (each an allow rule), then
// DefaultAction. Targets are an exact domain ("pypi.org"), a wildcard
// domain ("*.example.com": its subdomains), an IP address or a CIDR, each
// optionally with a port ("example.com:443", "[2001:db8::1]:443",
// "10.0.0.0/8:5432"); package egress parses and matches them.
type NetworkPolicy struct {
	Mode  NetworkMode `json:"mode"`
	Allow []string    `json:"allow,omitempty"` // allow targets; only for NetworkLimited
	// DefaultAction (NetworkLimited only) decides a connection no rule
	// matches: "deny" (the default, "") or "allow".
	DefaultAction string `json:"defaultAction,omitempty"`
	// Rules (NetworkLimited only) are OpenSandbox's egress rules.
	Rules []NetworkRule `json:"rules,omitempty"`
}

// NetworkRule is one egress rule of a limited network: Action "allow" or
// "deny" of Target (see NetworkPolicy).
type NetworkRule struct {
	Action string `json:"action"`
	Target string `json:"target"`
}

// PolicySetter is a Provider that changes the egress policy of a running
// box of mode NetworkLimited in place, without restarting it; the new
// policy applies to every connection and name lookup the box makes after
// SetNetworkPolicy returns. Errors: a box that does not exist wraps
// ErrNotFound; a box of another mode, or a policy of another mode, is
// CodeCapability; a policy the backend cannot parse is CodeInvalidRequest.
type PolicySetter interface {
	SetNetworkPolicy(ctx context.Context, id string, p NetworkPolicy) error
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
	// Volumes are mounted into the box (see Volume); they need
	// Capabilities.PersistentWorkspace, and host paths HostPathVolumes.
	Volumes []Volume `json:"volumes,omitempty"`
	// Runtime names the OCI runtime of the box, for backends that offer a
	// choice (Capabilities.Runtimes); empty is the backend's default.
	Runtime string `json:"runtime,omitempty"`
	// CredentialProxy (OpenSandbox's credentialProxy.enabled) gives the box
	// a Credential Vault on its egress API: the server's egress proxy
	// terminates TLS for the vault's destinations and the box trusts the
	// server's CA. It needs network mode limited. Backends need not read
	// it: the server applies it through the egress proxy and execd.
	CredentialProxy bool `json:"credentialProxy,omitempty"`
}

// Validate checks the Spec on its own, before any backend sees it, and
// fills defaults (network mode none). Errors carry CodeInvalidRequest.
func (s *Spec) Validate() error {
	if s.Network.Mode == "" {
		s.Network.Mode = NetworkNone
	}
	switch s.Network.Mode {
	case NetworkNone, NetworkUnrestricted:
		if len(s.Network.Allow) > 0 || len(s.Network.Rules) > 0 || s.Network.DefaultAction != "" {
			return Errorf(CodeInvalidRequest, "network rules need mode %q", NetworkLimited)
		}
	case NetworkLimited:
		switch s.Network.DefaultAction {
		case "", "deny", "allow":
		default:
			return Errorf(CodeInvalidRequest, "network defaultAction must be allow or deny, got %q", s.Network.DefaultAction)
		}
		for _, r := range s.Network.Rules {
			if r.Action != "allow" && r.Action != "deny" {
				return Errorf(CodeInvalidRequest, "egress rule action must be allow or deny, got %q", r.Action)
			}
		}
	default:
		return Errorf(CodeInvalidRequest, "unknown network mode %q (want none, limited or unrestricted)", s.Network.Mode)
	}
	if s.CredentialProxy && s.Network.Mode != NetworkLimited {
		return Errorf(CodeInvalidRequest, "the credential proxy needs network mode %q, not %q", NetworkLimited, s.Network.Mode)
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
	if err := validateVolumes(s.Volumes); err != nil {
		return err
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
