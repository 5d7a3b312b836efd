package sandbox

import (
	"slices"
	"strings"
)

// Capability names something a backend may or may not offer.
type Capability string

const (
	CapPause               Capability = "pause"
	CapSnapshot            Capability = "snapshot"
	CapPorts               Capability = "ports"
	CapPTY                 Capability = "pty"
	CapBrowser             Capability = "browser"
	CapGPU                 Capability = "gpu"
	CapPersistentWorkspace Capability = "persistent-workspace"
	CapNetworkLimited      Capability = "network-limited"
	CapNetworkUnrestricted Capability = "network-unrestricted"
)

var allCapabilities = []Capability{
	CapPause, CapSnapshot, CapPorts, CapPTY, CapBrowser, CapGPU,
	CapPersistentWorkspace, CapNetworkLimited, CapNetworkUnrestricted,
}

// Known reports whether c is a capability AstraBox defines.
func (c Capability) Known() bool { return slices.Contains(allCapabilities, c) }

func capabilityNames() []string {
	out := make([]string, len(allCapabilities))
	for i, c := range allCapabilities {
		out[i] = string(c)
	}
	return out
}

// Isolation says how strongly a backend separates a box from the host.
type Isolation string

const (
	IsolationNone      Isolation = "none"      // processes on the host (test harness only)
	IsolationContainer Isolation = "container" // namespaces, cgroups, seccomp
	IsolationSandboxed Isolation = "sandboxed" // a user-space kernel such as gVisor
	IsolationVM        Isolation = "vm"        // a hardware-virtualised guest
)

// Resource names a limit a backend can enforce.
type Resource string

const (
	ResourceCPU    Resource = "cpu"
	ResourceMemory Resource = "memory"
	ResourcePIDs   Resource = "pids"
	ResourceDisk   Resource = "disk"
)

// Capabilities is the static description of what a backend offers. It must
// be true: the conformance suite checks that what is claimed is enforced.
type Capabilities struct {
	Isolation           Isolation     `json:"isolation"`
	NetworkModes        []NetworkMode `json:"networkModes"`
	Limits              []Resource    `json:"limits"`
	Pause               bool          `json:"pause"`
	Snapshot            bool          `json:"snapshot"`
	Ports               bool          `json:"ports"`
	PTY                 bool          `json:"pty"`
	Browser             bool          `json:"browser"`
	GPU                 bool          `json:"gpu"`
	PersistentWorkspace bool          `json:"persistentWorkspace"`
	// HostPathVolumes says that Spec volumes may name host directories
	// (under the roots the backend's configuration allows); named volumes
	// need PersistentWorkspace.
	HostPathVolumes bool `json:"hostPathVolumes,omitempty"`
	// Runtimes are the OCI runtimes a Spec may name, with the isolation
	// each gives; empty when the backend offers no choice (Isolation is
	// then the only one).
	Runtimes []Runtime `json:"runtimes,omitempty"`
	// EgressProxy says that the backend's network limited goes through
	// the egress proxy it was given, the server's: what delivering
	// credentials needs (Spec.CredentialProxy, a Session's protected
	// secrets). Such a backend installs the proxy's CA in a box created
	// with CredentialProxy before the box runs its entrypoint
	// (package egress/trust's files). A backend whose limited mode is
	// another's (a remote server's) leaves it false.
	EgressProxy bool `json:"egressProxy,omitempty"`
}

// Runtime is an OCI runtime a backend offers.
type Runtime struct {
	Name      string    `json:"name"`
	Isolation Isolation `json:"isolation"`
}

// Has reports whether the backend offers c.
func (c Capabilities) Has(cap Capability) bool {
	switch cap {
	case CapPause:
		return c.Pause
	case CapSnapshot:
		return c.Snapshot
	case CapPorts:
		return c.Ports
	case CapPTY:
		return c.PTY
	case CapBrowser:
		return c.Browser
	case CapGPU:
		return c.GPU
	case CapPersistentWorkspace:
		return c.PersistentWorkspace
	case CapNetworkLimited:
		return slices.Contains(c.NetworkModes, NetworkLimited)
	case CapNetworkUnrestricted:
		return slices.Contains(c.NetworkModes, NetworkUnrestricted)
	}
	return false
}

// List returns every capability the backend offers, in a stable order.
func (c Capabilities) List() []Capability {
	var out []Capability
	for _, cap := range allCapabilities {
		if c.Has(cap) {
			out = append(out, cap)
		}
	}
	return out
}

// Check returns a CodeCapability error naming the first capability the Spec
// needs (requested explicitly, or implied by its network mode) that c lacks,
// together with what is available.
func (c Capabilities) Check(s Spec) error {
	need := slices.Clone(s.Capabilities)
	if len(s.Volumes) > 0 && !c.PersistentWorkspace {
		return &Error{Code: CodeCapability, Message: "capability " + string(CapPersistentWorkspace) + " (volumes) is not supported by this backend; available: " + joinCaps(c.List())}
	}
	for _, v := range s.Volumes {
		if v.HostPath != "" && !c.HostPathVolumes {
			return &Error{Code: CodeCapability, Message: "host-path volumes are not enabled on this backend (the server allows no host path roots); use a named volume (pvc)"}
		}
	}
	switch s.Network.Mode {
	case NetworkLimited:
		need = append(need, CapNetworkLimited)
	case NetworkUnrestricted:
		need = append(need, CapNetworkUnrestricted)
	}
	for _, cap := range need {
		if !c.Has(cap) {
			return &Error{Code: CodeCapability, Message: "capability " + string(cap) + " is not supported by this backend; available: " + joinCaps(c.List())}
		}
	}
	if s.CredentialProxy && !c.EgressProxy {
		return &Error{Code: CodeCapability, Message: "credentialProxy needs network limited through this server's egress proxy, which this backend does not route through"}
	}
	if s.Runtime != "" && !slices.ContainsFunc(c.Runtimes, func(r Runtime) bool { return r.Name == s.Runtime }) {
		names := make([]string, len(c.Runtimes))
		for i, r := range c.Runtimes {
			names[i] = r.Name
		}
		avail := "none (the backend offers no choice of runtime)"
		if len(names) > 0 {
			avail = strings.Join(names, ", ")
		}
		return &Error{Code: CodeCapability, Message: "runtime " + s.Runtime + " is not offered by this backend; available: " + avail}
	}
	return nil
}

func joinCaps(caps []Capability) string {
	if len(caps) == 0 {
		return "none"
	}
	s := ""
	for i, c := range caps {
		if i > 0 {
			s += ", "
		}
		s += string(c)
	}
	return s
}
