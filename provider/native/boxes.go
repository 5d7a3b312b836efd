package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/internal/hostnet"
	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
)

// boxState is the versioned record of a box, kept in its directory (mode
// 0600, unreadable from inside the box) and returned as Info.StateBlob,
// from which Attach restores it.
type boxState struct {
	Version   int       `json:"version"`
	PID       int       `json:"pid"`
	PIDStart  uint64    `json:"pidStart"` // start time of PID, against pid reuse
	Slot      int       `json:"slot"`
	Token     string    `json:"token"`
	Image     string    `json:"image"`
	CreatedAt time.Time `json:"createdAt"`
	// Claims are the named volumes the box mounts.
	Claims []string `json:"claims,omitempty"`
	// DiskBytes is the size of the box's writable layer.
	DiskBytes int64 `json:"diskBytes,omitempty"`
}

// Create implements sandbox.Provider.
func (p *Provider) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	if err := spec.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	if err := p.Capabilities().Check(spec); err != nil {
		return sandbox.Info{}, err
	}
	unlock := p.lock(id)
	defer unlock()
	if info, err := p.inspect(id); err == nil {
		if info.State == sandbox.StateRunning || info.State == sandbox.StatePaused {
			return info, nil
		}
		if err := p.remove(ctx, id); err != nil {
			return sandbox.Info{}, err
		}
	}
	info, err := p.start(ctx, id, spec)
	if err != nil {
		if rerr := p.remove(context.WithoutCancel(ctx), id); rerr != nil {
			p.log.Error("clean up failed create", "sandbox_id", id, "err", rerr)
		}
		return sandbox.Info{}, err
	}
	return info, nil
}

func (p *Provider) resources(r sandbox.Resources) sandbox.Resources {
	return r.WithDefaults(p.cfg.Defaults)
}

func (p *Provider) start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	cfg := initConfig{ID: id, Hostname: id, Binary: p.binary}
	// Shared until this box holds its slot: the host firewall set up
	// below stays in place (see removeFirewall).
	unlockSlots, err := p.slotsLock(false)
	if err != nil {
		return sandbox.Info{}, err
	}
	defer func() {
		if unlockSlots != nil {
			unlockSlots()
		}
	}()
	unrestricted := spec.Network.Mode == sandbox.NetworkUnrestricted
	var servers []netip.Addr
	if unrestricted {
		servers = hostnet.Nameservers()
		if err := hostFirewall.ensure(p.network, servers); err != nil {
			return sandbox.Info{}, fmt.Errorf("network unrestricted: %w", err)
		}
	}
	resolv := resolvConf(unrestricted, servers)
	limited := spec.Network.Mode == sandbox.NetworkLimited
	if limited {
		if err := p.prepareLimited(spec.Network); err != nil {
			return sandbox.Info{}, err
		}
	}
	var imageDir string // an imported image's root
	switch spec.Image {
	case "", "host":
		cfg.HostImage = true
		cfg.Etc = hostImageEtc(id, resolv)
		cfg.HostEtc = hostEtc("/etc")
	default:
		if p.cfg.Images == nil {
			return sandbox.Info{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "unknown image %q (this backend has only \"host\")", spec.Image)
		}
		dir, err := p.cfg.Images(spec.Image)
		if err != nil {
			return sandbox.Info{}, err
		}
		imageDir = dir
		cfg.Etc = boxEtc(id, resolv)
	}
	res := p.resources(spec.Resources)
	cfg.DiskBytes = res.DiskBytes
	cfg.TmpBytes = min(res.DiskBytes, 256<<20)
	cfg.ShmBytes = min(res.MemoryBytes/2, 64<<20)
	cfg.Env = boxEnv(spec.Env)
	cfg.Entrypoint = spec.Entrypoint
	if spec.CredentialProxy { // Egress is set: Check refused CredentialProxy otherwise
		if cfg.TrustCA, err = p.cfg.Egress.CredentialProxyCA(); err != nil {
			return sandbox.Info{}, err
		}
	}
	vols, volFDs, err := p.openVolumes(id, spec.Volumes)
	if err != nil {
		return sandbox.Info{}, err
	}
	defer p.release(id)
	defer closeFDs(volFDs)
	var claims []string
	for _, v := range vols {
		cfg.Volumes = append(cfg.Volumes, initVolume{Name: v.Name, MountPath: v.MountPath})
		if v.Claim != "" && !slices.Contains(claims, v.Claim) {
			claims = append(claims, v.Claim)
		}
	}

	dir := p.boxDir(id)
	if err := os.Mkdir(dir, 0o711); err != nil {
		return sandbox.Info{}, fmt.Errorf("create box dir: %w", err)
	}
	cfg.Root = filepath.Join(dir, rootDir)
	if err := os.Mkdir(cfg.Root, 0o755); err != nil {
		return sandbox.Info{}, fmt.Errorf("create box root: %w", err)
	}
	if err := p.writeDeadline(id, deadlineOf(spec), true); err != nil {
		return sandbox.Info{}, err
	}
	slot, err := p.allocSlot(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	unlockSlots()
	unlockSlots = nil
	if err := p.cg.create(id, res); err != nil {
		return sandbox.Info{}, err
	}
	cfg.CgroupDirs = p.cg.dirMap(id)
	var tb [24]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])

	sock := filepath.Join(dir, sockFile)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("listen on execd socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	listener, err := l.File()
	l.Close()
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("execd socket: %w", err)
	}
	defer listener.Close()
	if err := os.Chmod(sock, 0o600); err != nil {
		return sandbox.Info{}, fmt.Errorf("execd socket: %w", err)
	}

	var link *boxLink
	if unrestricted {
		l, err := linkFor(p.network, slot)
		if err != nil {
			return sandbox.Info{}, err
		}
		link = &l
	}
	if limited {
		l, err := p.startLimited(id, slot, spec.Network, &cfg)
		if err != nil {
			return sandbox.Info{}, err
		}
		link = &l
	}
	cmd, err := p.spawn(&cfg, slot, listener, token, imageDir, link, boxMounts{vols: vols, fds: volFDs})
	if err != nil {
		return sandbox.Info{}, err
	}
	st := boxState{Version: stateVersion, PID: cmd.Process.Pid, PIDStart: procfs.StartTime(cmd.Process.Pid), Slot: slot, Token: token,
		Image: spec.Image, CreatedAt: time.Now().UTC(), Claims: claims, DiskBytes: res.DiskBytes}
	if err := p.writeState(id, st); err != nil {
		return sandbox.Info{}, err
	}
	c := client.New("http://execd", client.WithToken(token), client.WithDialer(client.UnixDialer(sock)))
	readyCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.WaitReady(readyCtx); err != nil {
		return sandbox.Info{}, fmt.Errorf("box %s did not start: %w (%s)", id, err, p.logTail(id))
	}
	return p.info(id, st)
}

// boxMounts are the volumes of a box being spawned and the descriptors of
// what to mount for each (see openVolumes).
type boxMounts struct {
	vols []sandbox.Volume
	fds  []int
}

// spawn starts the box's init in new namespaces, places it in the box's
// cgroups, hands it its configuration (and imageDir, unless the box runs
// the host image, then its volumes' mounts), plugs in its network link if
// it has one, and lets it go.
func (p *Provider) spawn(cfg *initConfig, slot int, listener *os.File, token, imageDir string, link *boxLink, mounts boxMounts) (*exec.Cmd, error) {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("config pipe: %w", err)
	}
	defer cfgR.Close()
	defer cfgW.Close()
	syncR, syncW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sync pipe: %w", err)
	}
	defer syncR.Close()
	defer syncW.Close()
	tokR, tokW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("token pipe: %w", err)
	}
	defer tokR.Close()
	defer tokW.Close()
	// The output log and the deadline go to init alone (fdLog,
	// fdDeadline); init's stdio is /dev/null.
	logf, err := os.OpenFile(filepath.Join(p.boxDir(cfg.ID), logFile), os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("box log: %w", err)
	}
	defer logf.Close()
	deadline, err := os.Open(filepath.Join(p.boxDir(cfg.ID), deadlineFile))
	if err != nil {
		return nil, fmt.Errorf("box deadline: %w", err)
	}
	defer deadline.Close()
	extra := []*os.File{cfgR, syncR, listener, tokR, nil, logf, deadline}
	var imageSock *os.File
	if !cfg.HostImage || len(mounts.vols) > 0 {
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("image socket: %w", err)
		}
		imageSock = os.NewFile(uintptr(pair[0]), "image")
		defer imageSock.Close()
		child := os.NewFile(uintptr(pair[1]), "image-child")
		defer child.Close()
		extra[fdImage-3] = child
	}

	uid := hostUID(slot)
	cmd := &exec.Cmd{
		Path:       p.binary,
		Args:       []string{"astrabox", "init"},
		Env:        []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		Dir:        "/",
		ExtraFiles: extra,
		SysProcAttr: &syscall.SysProcAttr{
			Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID |
				syscall.CLONE_NEWUTS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWNET,
			UidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: slotSize}},
			GidMappings:                []syscall.SysProcIDMap{{ContainerID: 0, HostID: uid, Size: slotSize}},
			GidMappingsEnableSetgroups: true,
			// Become root of the new namespace (host uid `uid`) before exec.
			Credential: &syscall.Credential{Uid: 0, Gid: 0},
			Setsid:     true,
		},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start init: %w", err)
	}
	// Reap init when it ends while this process lives, keeping how it
	// ended.
	exit := &initExit{done: make(chan struct{})}
	p.exits.Store(cfg.ID, exit)
	go func() {
		_ = cmd.Wait()
		if cmd.ProcessState != nil {
			exit.status, exit.known = cmd.ProcessState.Sys().(syscall.WaitStatus)
		}
		close(exit.done)
	}()
	// Out of memory, the kernel kills the box's workload before its init
	// or execd (execd resets the score of what it starts).
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid), []byte("-998"), 0)
	if err := p.cg.join(cfg.ID, cmd.Process.Pid); err != nil {
		return cmd, err
	}
	if imageSock != nil && !cfg.HostImage {
		if err := sendImage(imageSock, imageDir, cmd.Process.Pid); err != nil {
			return cmd, err
		}
	}
	if err := sendVolumes(imageSock, mounts.vols, mounts.fds, cmd.Process.Pid); err != nil {
		return cmd, err
	}
	if link != nil {
		if err := p.plugNetwork(cmd.Process.Pid, *link); err != nil {
			return cmd, err
		}
	}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		return cmd, fmt.Errorf("send init config: %w", err)
	}
	cfgW.Close()
	if _, err := tokW.WriteString(token); err != nil {
		return cmd, fmt.Errorf("send token: %w", err)
	}
	tokW.Close()
	if _, err := syncW.Write([]byte{1}); err != nil {
		return cmd, fmt.Errorf("release init: %w (%s)", err, p.logTail(cfg.ID))
	}
	return cmd, nil
}

// boxEnv is the environment of a box's execd and entrypoint.
func boxEnv(extra map[string]string) []string {
	env := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm", "HOSTNAME": "",
	}
	delete(env, "HOSTNAME")
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

func (p *Provider) writeState(id string, st boxState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	path := filepath.Join(p.boxDir(id), stateFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

func (p *Provider) readState(id string) (boxState, error) {
	b, err := os.ReadFile(filepath.Join(p.boxDir(id), stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return boxState{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return boxState{}, fmt.Errorf("read state of %s: %w", id, err)
	}
	return decodeState(id, b)
}

// info turns a state record into observed Info.
func (p *Provider) info(id string, st boxState) (sandbox.Info, error) {
	b, _ := json.Marshal(st)
	info := sandbox.Info{ID: id, State: sandbox.StateRunning, CreatedAt: st.CreatedAt, AccessToken: st.Token, StateBlob: b}
	if st.PID <= 0 || procfs.StartTime(st.PID) != st.PIDStart {
		info.State, info.Reason = sandbox.StateFailed, p.deathReason(id)
		return info, nil
	}
	if frozen, err := p.cg.frozen(id); err == nil && frozen {
		info.State = sandbox.StatePaused
	}
	return info, nil
}

func (p *Provider) inspect(id string) (sandbox.Info, error) {
	st, err := p.readState(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return p.info(id, st)
}

// Inspect implements sandbox.Provider.
func (p *Provider) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	return p.inspect(id)
}

// List implements sandbox.Provider: every box with a directory or a
// cgroup. A cgroup without a record (left by a crash) is listed as Failed
// so that the reconciler deletes it.
func (p *Provider) List(ctx context.Context) ([]sandbox.Info, error) {
	seen := map[string]bool{}
	var out []sandbox.Info
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil {
		return nil, fmt.Errorf("list boxes: %w", err)
	}
	for _, e := range entries {
		id := e.Name()
		if validID(id) != nil {
			continue
		}
		seen[id] = true
		info, err := p.inspect(id)
		if err != nil {
			info = sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "no state record: " + err.Error()}
		}
		out = append(out, info)
	}
	ids, err := p.cg.list()
	if err != nil {
		return nil, err
	}
	foreign := p.foreignBoxes()
	for _, id := range ids {
		if !seen[id] && !foreign[id] && validID(id) == nil {
			out = append(out, sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "cgroup without a box record"})
		}
	}
	return out, nil
}

// Delete implements sandbox.Provider: every process of the box is killed
// through its cgroup, then its cgroups, uid range and directory go.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	return p.remove(ctx, id)
}

func (p *Provider) remove(ctx context.Context, id string) error {
	p.closeEgress(id)
	p.exits.Delete(id)
	st, stErr := p.readState(id)
	if stErr == nil && st.PID > 0 && procfs.StartTime(st.PID) == st.PIDStart {
		_ = syscall.Kill(st.PID, syscall.SIGKILL)
	}
	if err := p.cg.killAll(id); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	if err := p.cg.remove(id); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	if stErr == nil {
		if p.slotOwner(st.Slot) == id { // else the slot, and its link, are another box's now
			unplug(hostIfPrefix + strconv.Itoa(st.Slot))
			unplug(limitedIfPrefix + strconv.Itoa(st.Slot))
		}
		p.freeSlot(st.Slot, id)
	} else {
		p.freeSlotsOf(id)
	}
	if err := os.RemoveAll(p.boxDir(id)); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	return nil
}

// Pause implements sandbox.Provider with the cgroup freezer.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return p.setFrozen(id, true)
}

// Resume implements sandbox.Provider.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return p.setFrozen(id, false)
}

func (p *Provider) setFrozen(id string, frozen bool) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	info, err := p.inspect(id)
	if err != nil {
		return err
	}
	if info.State == sandbox.StateFailed {
		return sandbox.Errorf(sandbox.CodeConflict, "box %s has failed: %s", id, info.Reason)
	}
	return p.cg.freeze(id, frozen)
}

// Dial implements sandbox.Provider: the execd socket the host bound for
// the box (in a directory the box cannot reach).
func (p *Provider) Dial(ctx context.Context, id string) (net.Conn, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(p.boxDir(id), sockFile))
	if err != nil {
		return nil, fmt.Errorf("dial box %s: %w", id, err)
	}
	return c, nil
}

// logTail returns the end of the box's output log (at most logTailMax
// bytes of it are read), for error messages.
func (p *Provider) logTail(id string) string {
	b, err := readTail(filepath.Join(p.boxDir(id), logFile), logTailMax)
	if err != nil || len(b) == 0 {
		return "no init log"
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
}

// MemoryUsage returns the memory charged to box id's cgroup in bytes: its
// processes and its memory-backed file systems.
func (p *Provider) MemoryUsage(id string) (int64, error) {
	if err := validID(id); err != nil {
		return 0, err
	}
	return p.cg.memoryUsage(id)
}
