// Package docker is the sandbox backend built on a Docker Engine: each box
// is one container created from the Spec's image, running AstraBox's execd
// under Docker's init (docker-init), with every capability dropped but a
// small set, no_new_privs, the engine's seccomp profile, cgroup limits on
// memory (without swap), CPU and processes, size-limited tmpfs file systems
// for /tmp and /workspace, and no network at all unless the Spec asks for
// one. The engine is driven through its API with github.com/moby/moby/client;
// no other package imports the moby modules.
//
// Two kinds of engine are supported:
//
//   - A local engine (a unix socket on this host; the server runs as root):
//     the astrabox binary is bind-mounted read-only into each box from a
//     small tmpfs under DataDir, and the host reaches execd through a unix
//     socket in a per-box tmpfs directory bound into the box, which works
//     in every network mode, including none. Only a local engine offers
//     network limited (limited.go): its host rules and egress proxy are
//     on this host.
//   - A remote engine (Config.Remote, or any host that is not unix://): the
//     binary and the access token are copied into the container before it
//     starts, and execd is reached through a published TCP port. Network
//     none has no published ports, so a remote engine offers only the
//     unrestricted mode, and only when the operator filters its egress
//     (Config.EgressFiltered).
//
// State mapping: a container that is created or restarting is Pending,
// running is Running, paused is Paused, being removed is Stopping; an
// exited or dead container, a container without a record, and a record
// without a container are Failed (with the reason). A box with neither a
// record nor a container does not exist.
package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"
	"github.com/moby/profiles/seccomp"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/boxbin"
	"github.com/astrabox/astrabox/internal/hostpath"
	"github.com/astrabox/astrabox/sandbox"
)

// Config configures the Docker backend.
type Config struct {
	// DataDir holds the backend's host state: one directory per box (its
	// record with the execd access token, mode 0600, and for a local engine
	// the directory of execd's socket) and the copy of the binary that
	// boxes run. Required.
	DataDir string
	// Binary is the static astrabox binary that runs as execd in every box
	// (default: the running executable).
	Binary string
	// Host is the engine's address, e.g. "unix:///var/run/docker.sock" or
	// "tcp://10.0.0.5:2376" (default: the local socket).
	Host string
	// FromEnv configures the engine client from DOCKER_HOST,
	// DOCKER_API_VERSION, DOCKER_CERT_PATH and DOCKER_TLS_VERIFY, the only
	// environment this package ever reads. Host and APIVersion override it.
	FromEnv bool
	// APIVersion pins the engine API version (e.g. "1.41") and turns off
	// negotiation; by default the client negotiates the highest version
	// both sides speak (the client accepts engines from API 1.40 up).
	APIVersion string
	// Remote marks an engine on another machine even when Host is a unix
	// socket (an SSH-forwarded socket, say): the binary and the token are
	// copied in and execd is reached through a published port. Any Host
	// that is not unix:// is remote.
	Remote bool
	// InjectByCopy copies the binary into each container instead of
	// bind-mounting it, for a local engine too. Remote engines always copy.
	InjectByCopy bool
	// PublishIP is the engine host's address that execd's port is
	// published on for a remote engine (default 0.0.0.0).
	PublishIP string
	// DialHost is the address the server dials to reach published ports
	// (default: the host of Host, or 127.0.0.1 for a unix socket).
	DialHost string
	// EgressFiltered states that the operator blocks cloud metadata, the
	// engine host and private ranges for the backend's network on a remote
	// engine host (bridge name: see NetworkBridge). Only then does a remote
	// engine offer network unrestricted. A local engine installs these
	// rules itself with iptables.
	EgressFiltered bool
	// Runtime is the OCI runtime boxes run under ("" for the engine's
	// default, "runc", "runsc", "kata-runtime", ...). It decides
	// Capabilities().Isolation: runc and crun give container, gVisor
	// (runsc) sandboxed, Kata vm.
	Runtime string
	// Isolation states the isolation of a Runtime this package does not
	// know; it is required for such a runtime.
	Isolation sandbox.Isolation
	// Runtimes are further OCI runtimes (registered with the engine) that
	// a profile may choose for its boxes (sandbox.Spec.Runtime); each must
	// be one this package knows the isolation of. Capabilities lists them,
	// with Runtime when it is named.
	Runtimes []string
	// Owner is the value of the io.astrabox.owner label on everything the
	// backend creates, so that servers sharing an engine never take each
	// other's boxes for orphans (default: "astrabox-" and a hash of
	// DataDir).
	Owner string
	// Defaults are the limits of a box whose Spec leaves them zero.
	Defaults sandbox.Resources
	// ReadonlyRootfs makes the image's file system read-only in the box;
	// only /tmp, /workspace, /var/tmp, /run and /dev/shm are writable, all
	// size-limited, so the disk limit then holds everywhere. Needs a local
	// engine without InjectByCopy.
	ReadonlyRootfs bool
	// StorageQuota limits each container's writable layer to the disk
	// limit with the engine's storage-opt size (overlay2 on xfs with
	// project quotas, btrfs, zfs); the engine refuses it otherwise.
	StorageQuota bool
	// SeccompProfile is the seccomp profile (JSON) boxes run under. By
	// default it is Docker's current default profile (from
	// github.com/moby/profiles/seccomp), sent with every container, so
	// that an older engine whose built-in profile still allows io_uring
	// confines boxes as a current one does. The backend never runs a box
	// unconfined.
	SeccompProfile string
	// Iptables is the iptables command that guards the unrestricted
	// network of a local engine (default: the first of /usr/sbin/iptables,
	// /sbin/iptables, /usr/bin/iptables that exists); "none" turns the
	// unrestricted mode off.
	Iptables string
	// HostPathRoots are the host directories under which volumes may name
	// host paths, on a local engine (absolute, clean, no symbolic links;
	// see hostpath.Roots.Check); none disables host-path volumes. Root in
	// a box is root on the files under them.
	HostPathRoots []string
	// NoPull refuses images that the engine does not hold instead of
	// pulling them.
	NoPull bool
	// PullTimeout bounds pulling one image (default 10 minutes).
	PullTimeout time.Duration
	// AllowRegistries are registries (host or host:port, as references
	// write them) a pull may reach although they resolve to a loopback,
	// link-local or private address; pulls from any other such registry
	// are refused (see checkRegistry).
	AllowRegistries []string
	// StartTimeout bounds waiting for a new box's execd (default 60 s).
	StartTimeout time.Duration
	// Egress serves the egress proxies of network limited (limited.go);
	// the mode needs it, a local engine and iptables. The Provider opens
	// gates on it and closes only those (nil: neither the mode nor
	// credentialProxy is offered).
	Egress egress.Gates
	// Logger receives operational logs.
	Logger *slog.Logger
}

// Default limits of a box.
var defaultResources = sandbox.Resources{MilliCPU: 1000, MemoryBytes: 512 << 20, PIDs: 512, DiskBytes: 1 << 30}

// Provider is the Docker backend. It is safe for concurrent use. It keeps
// nothing about boxes in memory: a new Provider on the same DataDir and
// engine re-attaches to the boxes of an earlier one.
type Provider struct {
	cfg Config
	log *slog.Logger
	cli *client.Client

	instanceMu sync.Mutex
	instance   string // see Instance
	local      bool   // execd is reached through a unix socket under DataDir
	socket     string // the engine's unix socket path, when it has one
	copyIn     bool   // the binary is copied into containers
	iptab      string // iptables command; "" when unrestricted is unavailable
	hash       string // short hash of Owner, for host-side names
	binary     string // host path of the binary bound into boxes (local, no copy)

	mu      sync.Mutex
	locks   map[string]*sync.Mutex // per box id
	pulls   map[string]*pullState  // image pulls in flight, by reference
	netMu   sync.Mutex             // serialises setting up the network
	netMade bool                   // this Provider set up the network (under netMu)

	limMu      sync.Mutex   // serialises the limited network, its rules and its gate
	limGate    *egress.Gate // the limited network's gate, once opened
	limGW      netip.Addr   // where limGate listens
	limPending int          // limited boxes between ensureLimited and limitedDone
	limMade    bool         // this Provider used the limited network (under limMu)
}

// New checks cfg, prepares DataDir and returns a Provider. It does not
// contact the engine: Health does.
func New(cfg Config) (*Provider, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("docker: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	cfg.DataDir = abs
	if cfg.Owner == "" {
		cfg.Owner = DefaultOwner(abs)
	}
	if err := validName(cfg.Owner); err != nil {
		return nil, fmt.Errorf("docker: owner: %w", err)
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("docker: locate astrabox binary: %w", err)
		}
		cfg.Binary = exe
	}
	if cfg.PullTimeout <= 0 {
		cfg.PullTimeout = 10 * time.Minute
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 60 * time.Second
	}
	if cfg.Isolation == "" {
		iso, ok := runtimeIsolation(cfg.Runtime)
		if !ok {
			return nil, fmt.Errorf("docker: unknown runtime %q: set Isolation to what it gives", cfg.Runtime)
		}
		cfg.Isolation = iso
	}
	for _, r := range cfg.Runtimes {
		if _, ok := runtimeIsolation(r); !ok || r == "" {
			return nil, fmt.Errorf("docker: runtime %q: not one whose isolation is known (runc, crun, runsc, kata-runtime, ...)", r)
		}
	}
	cfg.Defaults = cfg.Defaults.WithDefaults(defaultResources)
	if err := hostpath.Roots(cfg.HostPathRoots).Check(); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if cfg.SeccompProfile == "" {
		b, err := json.Marshal(seccomp.DefaultProfile())
		if err != nil {
			return nil, fmt.Errorf("docker: default seccomp profile: %w", err)
		}
		cfg.SeccompProfile = string(b)
	}

	cli, err := newClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("docker: engine client: %w", err)
	}
	p := &Provider{cfg: cfg, log: cfg.Logger, cli: cli, locks: make(map[string]*sync.Mutex), pulls: make(map[string]*pullState)}
	sum := sha256.Sum256([]byte(cfg.Owner))
	p.hash = hex.EncodeToString(sum[:4])
	host := cli.DaemonHost()
	if path, ok := strings.CutPrefix(host, "unix://"); ok {
		p.socket = path
	}
	p.local = p.socket != "" && !cfg.Remote
	p.copyIn = !p.local || cfg.InjectByCopy
	if cfg.ReadonlyRootfs && p.copyIn {
		cli.Close()
		return nil, errors.New("docker: ReadonlyRootfs needs a local engine without InjectByCopy (nothing can be copied into a read-only container)")
	}
	if !p.local && p.cfg.DialHost == "" {
		p.cfg.DialHost = "127.0.0.1"
		if u, err := url.Parse(host); err == nil && u.Hostname() != "" && p.socket == "" {
			p.cfg.DialHost = u.Hostname()
		}
	}
	if p.cfg.PublishIP == "" {
		p.cfg.PublishIP = "0.0.0.0"
	}
	if p.local {
		p.iptab = findIptables(cfg.Iptables)
	}
	if err := os.MkdirAll(filepath.Join(abs, dirBoxes), 0o700); err != nil {
		cli.Close()
		return nil, fmt.Errorf("docker: %w", err)
	}
	if p.local && !p.copyIn {
		bin, err := boxbin.Install(cfg.Binary, filepath.Join(abs, dirBin))
		if err != nil {
			cli.Close()
			return nil, fmt.Errorf("docker: %w", err)
		}
		p.binary = bin
	}
	p.restoreEgress()
	return p, nil
}

// DefaultOwner is the owner label of a Provider whose Config names none:
// "astrabox-" and a hash of dataDir, which must be absolute and clean (as
// New makes Config.DataDir), so that servers with different data dirs
// never take each other's boxes for orphans.
func DefaultOwner(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "astrabox-" + hex.EncodeToString(sum[:4])
}

// newClient builds the engine client that cfg describes.
func newClient(cfg Config) (*client.Client, error) {
	var opts []client.Opt
	if cfg.FromEnv {
		opts = append(opts, client.FromEnv)
	}
	if cfg.Host != "" {
		opts = append(opts, client.WithHost(cfg.Host))
	}
	if cfg.APIVersion != "" {
		opts = append(opts, client.WithAPIVersion(cfg.APIVersion))
	}
	return client.New(opts...)
}

// runtimeIsolation is the isolation a known OCI runtime gives.
func runtimeIsolation(runtime string) (sandbox.Isolation, bool) {
	r := strings.ToLower(runtime)
	switch {
	case r == "" || r == "runc" || r == "crun" || r == "io.containerd.runc.v2" || r == "youki":
		return sandbox.IsolationContainer, true
	case strings.Contains(r, "runsc") || strings.Contains(r, "gvisor"):
		return sandbox.IsolationSandboxed, true
	case strings.Contains(r, "kata") || strings.Contains(r, "firecracker") || strings.Contains(r, "clh"):
		return sandbox.IsolationVM, true
	}
	return "", false
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "docker" }

// Capabilities implements sandbox.Provider. Isolation is that of the
// default runtime; Runtimes lists the ones a Spec may choose, each with
// its own. Network none needs a local
// engine (execd is reached through a unix socket); unrestricted needs the
// egress rules, installed here with iptables for a local engine, or
// declared by the operator for a remote one; limited needs a local engine,
// iptables and Config.Egress. The disk limit holds only when the writable
// layer is bounded too (ReadonlyRootfs or StorageQuota).
func (p *Provider) Capabilities() sandbox.Capabilities {
	c := sandbox.Capabilities{
		Isolation: p.cfg.Isolation,
		Limits:    []sandbox.Resource{sandbox.ResourceCPU, sandbox.ResourceMemory, sandbox.ResourcePIDs},
		Pause:     true,
		Ports:     true,
		PTY:       true,
		// Named volumes are the engine's; host paths are staged on this
		// host, so they need a local engine.
		PersistentWorkspace: true,
		HostPathVolumes:     p.local && len(p.cfg.HostPathRoots) > 0,
		Snapshot:            true, // the engine's commit (snapshots.go)
	}
	if p.local {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkNone)
	}
	if (p.local && p.iptab != "") || (!p.local && p.cfg.EgressFiltered) {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkUnrestricted)
	}
	if p.limitedAvailable() {
		c.NetworkModes = append(c.NetworkModes, sandbox.NetworkLimited)
		c.EgressProxy = true
	}
	if p.cfg.ReadonlyRootfs || p.cfg.StorageQuota {
		c.Limits = append(c.Limits, sandbox.ResourceDisk)
	}
	if len(p.cfg.Runtimes) > 0 {
		if p.cfg.Runtime != "" {
			c.Runtimes = append(c.Runtimes, sandbox.Runtime{Name: p.cfg.Runtime, Isolation: p.cfg.Isolation})
		}
		for _, r := range p.cfg.Runtimes {
			if r == p.cfg.Runtime {
				continue
			}
			iso, _ := runtimeIsolation(r)
			c.Runtimes = append(c.Runtimes, sandbox.Runtime{Name: r, Isolation: iso})
		}
	}
	return c
}

// Health implements sandbox.Provider: undetected when the local engine's
// socket does not exist, unhealthy when the engine does not answer (or
// answers with an API version this client cannot speak), or when this
// process cannot reach a local box's execd socket for want of root.
func (p *Provider) Health(ctx context.Context) sandbox.Health {
	if p.socket != "" {
		if _, err := os.Stat(p.socket); err != nil {
			return sandbox.Health{Status: sandbox.Undetected, Reason: "no Docker socket at " + p.socket}
		}
	}
	ping, err := p.cli.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true})
	if err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: "docker engine: " + err.Error()}
	}
	if ping.OSType != "" && ping.OSType != "linux" {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: "docker engine runs " + ping.OSType + " containers; boxes need linux"}
	}
	if p.local && os.Geteuid() != 0 {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: "a local Docker engine needs the server to run as root (box sockets and mounts)"}
	}
	return sandbox.Health{Status: sandbox.Healthy}
}

// APIVersion returns the engine API version the client speaks (after
// negotiation, once the engine has been contacted).
func (p *Provider) APIVersion() string { return p.cli.ClientVersion() }

// lock serialises operations on one box id.
func (p *Provider) lock(id string) func() {
	p.mu.Lock()
	l, ok := p.locks[id]
	if !ok {
		l = &sync.Mutex{}
		p.locks[id] = l
	}
	p.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// validID accepts the ids AstraBox generates and nothing that could escape
// a directory or break a container name.
func validID(id string) error {
	if err := validName(id); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
	}
	return nil
}

func validName(s string) error {
	if s == "" || len(s) > 64 {
		return fmt.Errorf("%q must be 1 to 64 characters", s)
	}
	for i, c := range s {
		ok := c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok || (i == 0 && (c == '-' || c == '_')) {
			return fmt.Errorf("%q may hold only letters, digits, - and _, and must start with a letter or digit", s)
		}
	}
	return nil
}
