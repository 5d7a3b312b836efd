// Package native is the sandbox backend built directly on the Linux
// kernel: each box is a tree of processes in its own user, PID, mount, UTS,
// IPC, network and cgroup namespaces, confined by cgroups, a seccomp
// allow-list, a reduced capability bounding set and no_new_privs, on a
// root file system of its own. It needs root on the host and nothing else.
//
// State mapping: a box whose init is alive is Running, or Paused when its
// cgroup is frozen; a box whose init is gone but whose records remain is
// Failed, its reason saying how init ended (sandbox.ReasonOOMKilled when
// the box's cgroup counted OOM kills and init was killed, else
// sandbox.ReasonExited with init's exit code or signal); a box with no
// records and no cgroup does not exist.
package native

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/boxbin"
	"github.com/astrabox/astrabox/internal/hostpath"
	"github.com/astrabox/astrabox/sandbox"
)

// Config configures the native backend.
type Config struct {
	// DataDir holds the backend's state: one directory per box and a copy
	// of the astrabox binary that boxes run (uid slots are host-wide: see
	// SlotDir).
	DataDir string
	// Binary is the astrabox binary to run as init and execd (default: the
	// running executable).
	Binary string
	// CgroupRoot is where cgroups are mounted (default /sys/fs/cgroup).
	CgroupRoot string
	// CgroupParent names the group boxes are created under (default
	// "astrabox-" and a hash of DataDir, so that servers with different
	// data dirs keep apart; one configured must differ between data dirs
	// too).
	CgroupParent string
	// SlotDir is the registry of uid slots that every native backend on
	// the host shares, whatever its data dir (default DefaultSlotDir; see
	// slots.go). Only tests set another.
	SlotDir string
	// Network is the IPv4 range boxes with network unrestricted are
	// addressed from, 4 addresses per box (default DefaultNetwork). It must
	// not overlap a network the host uses.
	Network string
	// Defaults are the limits of a box whose Spec leaves them zero.
	Defaults sandbox.Resources
	// Images resolves an image name other than "host" to the directory
	// holding its root file system.
	Images func(name string) (string, error)
	// VolumesDir holds the named volumes (default DataDir/volumes; see
	// volumes.go). It must be on a file system with idmapped mounts.
	VolumesDir string
	// HostPathRoots are the host directories under which volumes may name
	// host paths (absolute, clean, no symbolic links; see
	// hostpath.Roots.Check); none disables host-path volumes. Root in a
	// box acts as uid 0 on the files under them (they are idmapped as
	// the box sees them), so they must hold nothing a box may not own.
	HostPathRoots []string
	// Egress runs the egress proxies of boxes of network mode limited
	// (nil: the mode is not offered, nor credentialProxy). The Provider
	// opens gates on it and closes only those.
	Egress egress.Gates
	// Snapshots keeps snapshots as images (see snapshots.go); nil offers
	// none.
	Snapshots *SnapshotStore
	// Logger receives operational logs.
	Logger *slog.Logger
}

// Default limits of a box.
var defaultResources = sandbox.Resources{MilliCPU: 1000, MemoryBytes: 512 << 20, PIDs: 512, DiskBytes: 1 << 30}

// Provider is the native backend. It is safe for concurrent use.
type Provider struct {
	cfg     Config
	dataDir string // cfg.DataDir, absolute: how the slot registry names it
	log     *slog.Logger
	cg      *cgroups
	binary  string // the copy boxes run

	network netip.Prefix // see Config.Network
	mtu     int          // of box veths: the uplink's
	netOK   bool         // network unrestricted can be set up here

	mu    sync.Mutex
	locks map[string]*sync.Mutex  // per box id
	gates map[string]*egress.Gate // egress proxies of limited boxes, by box id (limited.go)

	volMu   sync.Mutex          // named volumes: creation, deletion, users
	pending map[string][]string // box id -> named volumes, while it is created

	// exits holds, by box id, how the inits this Provider started ended
	// (*initExit), for the reason of a box that died (see deathReason).
	exits sync.Map
}

// Layout of DataDir.
const (
	dirBoxes  = "boxes"
	dirBin    = "bin"
	stateFile = "state.json"
	sockFile  = "execd.sock"
	logFile   = "init.log"
	rootDir   = "root"
)

// New prepares DataDir and the cgroup parent and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("native: DataDir is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if cfg.SlotDir == "" {
		cfg.SlotDir = DefaultSlotDir
	}
	if cfg.CgroupParent == "" {
		// One group per data dir: two servers on one host must never take
		// each other's boxes for orphans.
		sum := sha256.Sum256([]byte(abs))
		cfg.CgroupParent = "astrabox-" + hex.EncodeToString(sum[:4])
	}
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("native: locate astrabox binary: %w", err)
		}
		cfg.Binary = exe
	}
	cfg.Defaults = cfg.Defaults.WithDefaults(defaultResources)
	if err := hostpath.Roots(cfg.HostPathRoots).Check(); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	// Box processes run as unprivileged host uids: every directory on the
	// way to their mount points and binary must be traversable.
	for _, dir := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, dirBoxes)} {
		if err := os.MkdirAll(dir, 0o711); err != nil {
			return nil, fmt.Errorf("native: %w", err)
		}
		if err := os.Chmod(dir, 0o711); err != nil {
			return nil, fmt.Errorf("native: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.SlotDir, 0o700); err != nil {
		return nil, fmt.Errorf("native: slot registry: %w", err)
	}
	if err := checkTraversable(cfg.DataDir); err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	binary, err := boxbin.Install(cfg.Binary, filepath.Join(cfg.DataDir, dirBin))
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	cg, err := detectCgroups(cfg.CgroupRoot, cfg.CgroupParent)
	if err != nil {
		return nil, fmt.Errorf("native: %w", err)
	}
	if cfg.Network == "" {
		cfg.Network = DefaultNetwork
	}
	network, err := netip.ParsePrefix(cfg.Network)
	if err != nil || !network.Addr().Is4() || network.Bits() > 16 {
		return nil, fmt.Errorf("native: network %q: want an IPv4 range of /16 or larger (4 addresses for each of the %d uid slots)", cfg.Network, slotCount)
	}
	p := &Provider{cfg: cfg, dataDir: abs, log: cfg.Logger, cg: cg, binary: binary, locks: make(map[string]*sync.Mutex), pending: map[string][]string{},
		network: network.Masked(), mtu: uplinkMTU(), netOK: hostFirewall.available(), gates: map[string]*egress.Gate{}}
	p.adoptLegacySlots()
	p.reclaimAbandoned()
	p.sweepExpired(context.Background())
	if p.netOK && cfg.Egress != nil {
		p.restoreEgress()
	}
	return p, nil
}

// checkTraversable returns an error naming the first ancestor of dir that
// unprivileged users cannot traverse: box processes run as such users and
// must reach their mount points and binary under dir.
func checkTraversable(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for d := filepath.Dir(abs); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("data dir %s is under %s, which sandbox users cannot traverse (mode %v; needs o+x)", dir, d, fi.Mode().Perm())
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "native" }

// Capabilities implements sandbox.Provider. Network unrestricted is
// offered where iptables is installed (its firewall is what keeps boxes
// from the host and private ranges).
func (p *Provider) Capabilities() sandbox.Capabilities {
	modes := []sandbox.NetworkMode{sandbox.NetworkNone}
	if p.netOK {
		modes = append(modes, sandbox.NetworkUnrestricted)
		if p.cfg.Egress != nil {
			modes = append(modes, sandbox.NetworkLimited)
		}
	}
	return sandbox.Capabilities{
		Isolation:    sandbox.IsolationContainer,
		NetworkModes: modes,
		Limits:       []sandbox.Resource{sandbox.ResourceCPU, sandbox.ResourceMemory, sandbox.ResourcePIDs, sandbox.ResourceDisk},
		Pause:        true,
		Ports:        true,
		PTY:          true,
		// Named volumes are directories under VolumesDir; host paths need
		// allowed roots.
		PersistentWorkspace: true,
		HostPathVolumes:     len(p.cfg.HostPathRoots) > 0,
		Snapshot:            p.cfg.Snapshots != nil,
		EgressProxy:         slices.Contains(modes, sandbox.NetworkLimited),
	}
}

// Health implements sandbox.Provider.
func (p *Provider) Health(ctx context.Context) sandbox.Health {
	if os.Geteuid() != 0 {
		return sandbox.Health{Status: sandbox.Undetected, Reason: "the native backend needs root"}
	}
	if _, err := os.Stat("/proc/self/ns/user"); err != nil {
		return sandbox.Health{Status: sandbox.Undetected, Reason: "user namespaces are unavailable"}
	}
	if _, err := p.cg.list(); err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: err.Error()}
	}
	return sandbox.Health{Status: sandbox.Healthy}
}

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

func (p *Provider) boxDir(id string) string { return filepath.Join(p.cfg.DataDir, dirBoxes, id) }

// validID accepts the ids AstraBox generates and nothing that could
// escape a directory or a cgroup name.
func validID(id string) error {
	if id == "" || len(id) > 64 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
	}
	for i, c := range id {
		ok := c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
		if !ok || (i == 0 && (c == '-' || c == '_')) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
		}
	}
	return nil
}

// HasImage implements sandbox.ImageChecker: "host" always, any other name
// when Config.Images resolves it.
func (p *Provider) HasImage(_ context.Context, name string) (bool, error) {
	if name == "" || name == "host" {
		return true, nil
	}
	if p.cfg.Images == nil {
		return false, nil
	}
	if _, err := p.cfg.Images(name); err != nil {
		if sandbox.CodeOf(err) == sandbox.CodeImageNotFound {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

var _ sandbox.ImageChecker = (*Provider)(nil)
