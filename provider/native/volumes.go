package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/hostpath"
	"github.com/astrabox/astrabox/sandbox"
)

// Volumes of a native box. The host resolves each volume to a descriptor
// of the directory to mount (a host path beneath its allowed root, a named
// volume's data directory, then the sub-path beneath either, never
// through a link: see package hostpath), clones it as a detached mount
// idmapped to the box's user namespace (so uid 0 on disk is root in the
// box, whichever host uids the box runs as, and what a box writes is
// stored as the box sees it), nosuid, nodev, and read-only when asked, and
// sends the mounts to init over the mount socket, after the image's.
// Init attaches each on its mount path, made beneath the box's root
// without following links (see attachVolumes). Nothing is mounted in the
// host's namespace: a box's volumes go with its mount namespace.
//
// A named volume is VolumesDir/NAME: meta.json (its record) and data/
// (what boxes mount). VolumesDir is mode 0700, so host users never reach
// the files boxes write there (which may be setuid root on disk, as the
// box sees them).

// volumeMeta is the record of a named volume, VolumesDir/NAME/meta.json.
type volumeMeta struct {
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
}

const (
	volumeMetaFile = "meta.json"
	volumeDataDir  = "data"
)

// volumesDir is where named volumes live.
func (p *Provider) volumesDir() string {
	if p.cfg.VolumesDir != "" {
		return p.cfg.VolumesDir
	}
	return filepath.Join(p.cfg.DataDir, "volumes")
}

// openVolumes resolves the volumes of box id, in mount order, to O_PATH
// descriptors of what to mount, creating named volumes on first use, and
// counts the box among the users of its named volumes until its record
// names them (release, which the caller defers). The caller closes the
// descriptors (closeFDs) whatever happens next.
func (p *Provider) openVolumes(id string, vols []sandbox.Volume) ([]sandbox.Volume, []int, error) {
	var claims []string
	for _, v := range vols {
		if v.Claim != "" {
			claims = append(claims, v.Claim)
		}
	}
	p.volMu.Lock()
	p.pending[id] = claims
	p.volMu.Unlock()
	ordered := sandbox.VolumesInMountOrder(vols)
	fds := make([]int, 0, len(ordered))
	for _, v := range ordered {
		fd, err := p.openVolume(v)
		if err != nil {
			closeFDs(fds)
			return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		fds = append(fds, fd)
	}
	return ordered, fds, nil
}

func (p *Provider) openVolume(v sandbox.Volume) (int, error) {
	var base int
	var err error
	if v.HostPath != "" {
		base, err = hostpath.Roots(p.cfg.HostPathRoots).Open(v.HostPath)
	} else {
		base, err = p.ensureVolume(v.Claim, v.MustExist)
	}
	if err != nil {
		return -1, err
	}
	if v.SubPath == "" {
		return base, nil
	}
	defer unix.Close(base)
	fd, err := hostpath.Beneath(base, v.SubPath)
	if err != nil {
		return -1, fmt.Errorf("subPath: %w", err)
	}
	return fd, nil
}

// ensureVolume returns an O_PATH descriptor of named volume name's data
// directory, making the volume when it is missing (unless mustExist).
func (p *Provider) ensureVolume(name string, mustExist bool) (int, error) {
	if err := sandbox.ValidateVolumeName(name); err != nil {
		return -1, err
	}
	p.volMu.Lock()
	defer p.volMu.Unlock()
	root := p.volumesDir()
	if err := os.MkdirAll(root, 0o700); err != nil {
		return -1, fmt.Errorf("volumes dir: %w", err)
	}
	dir := filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(dir, volumeMetaFile)); errors.Is(err, fs.ErrNotExist) {
		if mustExist {
			return -1, sandbox.Errorf(sandbox.CodeNotFound, "named volume %q does not exist", name)
		}
		if err := p.makeVolume(dir, name); err != nil {
			return -1, err
		}
		p.log.Info("volume created", "volume", name)
	} else if err != nil {
		return -1, fmt.Errorf("volume %s: %w", name, err)
	}
	rootFD, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open volumes dir: %w", err)
	}
	defer unix.Close(rootFD)
	return hostpath.Beneath(rootFD, name+"/"+volumeDataDir)
}

// makeVolume builds a volume in a work directory and renames it into
// place whole, so a crash never leaves a half-made one under its name.
func (p *Provider) makeVolume(dir, name string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".tmp-"+name+"-")
	if err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Mkdir(filepath.Join(tmp, volumeDataDir), 0o755); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	if err := os.Chmod(filepath.Join(tmp, volumeDataDir), 0o755); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	b, _ := json.Marshal(volumeMeta{Name: name, CreatedAt: time.Now().UTC()})
	if err := os.WriteFile(filepath.Join(tmp, volumeMetaFile), b, 0o600); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("create volume %s: %w", name, err)
	}
	return nil
}

// sendVolumes clones each descriptor as a detached mount idmapped to the
// user namespace of process pid (nosuid, nodev, read-only as asked) and
// sends it on sock, in order.
func sendVolumes(sock *os.File, vols []sandbox.Volume, fds []int, pid int) error {
	if len(vols) == 0 {
		return nil
	}
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
	if err != nil {
		return fmt.Errorf("open box user namespace: %w", err)
	}
	defer ns.Close()
	for i, v := range vols {
		if err := sendVolume(sock, fds[i], int(ns.Fd()), v.ReadOnly); err != nil {
			return fmt.Errorf("volume %s: %w", v.Name, err)
		}
	}
	return nil
}

func sendVolume(sock *os.File, fd, userns int, readOnly bool) error {
	mnt, err := hostpath.CloneMount(fd)
	if err != nil {
		return err
	}
	defer unix.Close(mnt)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV, Userns_fd: uint64(userns)}
	if readOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return fmt.Errorf("idmap volume mount (its file system needs idmapped mount support): %w", err)
	}
	if err := unix.Sendmsg(int(sock.Fd()), []byte{1}, unix.UnixRights(mnt), nil, 0); err != nil {
		return fmt.Errorf("send volume mount: %w", err)
	}
	return nil
}

// release ends what openVolumes counted for box id: its record names its
// volumes by now, or it failed.
func (p *Provider) release(id string) {
	p.volMu.Lock()
	delete(p.pending, id)
	p.volMu.Unlock()
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// ListVolumes implements sandbox.Volumer.
func (p *Provider) ListVolumes(ctx context.Context) ([]sandbox.VolumeInfo, error) {
	entries, err := os.ReadDir(p.volumesDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	p.volMu.Lock()
	users := p.volumeUsers()
	p.volMu.Unlock()
	var out []sandbox.VolumeInfo
	for _, e := range entries {
		if !e.IsDir() || sandbox.ValidateVolumeName(e.Name()) != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.volumesDir(), e.Name(), volumeMetaFile))
		if err != nil {
			continue
		}
		var m volumeMeta
		_ = json.Unmarshal(b, &m)
		out = append(out, sandbox.VolumeInfo{Name: e.Name(), Backend: p.Name(), CreatedAt: m.CreatedAt, InUse: users[e.Name()]})
	}
	return out, nil
}

// DeleteVolume implements sandbox.Volumer: the volume is renamed away
// first (so its name is free at once), then its files are removed.
func (p *Provider) DeleteVolume(ctx context.Context, name string) error {
	if err := sandbox.ValidateVolumeName(name); err != nil {
		return err
	}
	p.volMu.Lock()
	defer p.volMu.Unlock()
	if users := p.volumeUsers()[name]; len(users) > 0 {
		return sandbox.Errorf(sandbox.CodeConflict, "volume %q is mounted by sandbox %s", name, users[0])
	}
	dir := filepath.Join(p.volumesDir(), name)
	tmp := filepath.Join(p.volumesDir(), fmt.Sprintf(".tmp-rm-%s-%d", name, time.Now().UnixNano()))
	if err := os.Rename(dir, tmp); errors.Is(err, fs.ErrNotExist) {
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
	} else if err != nil {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("delete volume %s: %w", name, err)
	}
	p.log.Info("volume deleted", "volume", name)
	return nil
}

// volumeUsers maps each named volume to the boxes whose records name it
// and the boxes being created with it (see openVolumes). The caller holds
// volMu.
func (p *Provider) volumeUsers() map[string][]string {
	out := map[string][]string{}
	for id, claims := range p.pending {
		for _, c := range claims {
			out[c] = append(out[c], id)
		}
	}
	entries, _ := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	for _, e := range entries {
		st, err := p.readState(e.Name())
		if err != nil {
			continue
		}
		for _, c := range st.Claims {
			if !slices.Contains(out[c], e.Name()) {
				out[c] = append(out[c], e.Name())
			}
		}
	}
	return out
}

var _ sandbox.Volumer = (*Provider)(nil)
