package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/hostpath"
	"github.com/astrabox/astrabox/sandbox"
)

// Volumes of a Docker box. A named volume is a Docker volume
// ("astrabox-HASH-NAME", labelled with the owner and its name), created on
// first use and mounted without copying the image's files into it; the
// engine keeps it when the box's container is removed.
//
// A host path, and a sub-path of a named volume on a local engine, is
// resolved on this host through descriptors only (package hostpath: no
// link is followed, nothing outside the allowed root or the volume is
// reachable), then the very directory resolved is cloned as a mount
// (open_tree, nosuid, nodev, read-only as asked) and attached under the
// box's directory, DataDir/boxes/ID/volumes/NAME, which the engine
// bind-mounts into the container. The engine never resolves a path a box
// could have changed in between; the staged mount is detached when the
// box is deleted, before its directory is removed. Like the run
// directory, this needs the engine to share the server's mount
// namespace. A remote engine gets sub-paths through the engine's own
// volume sub-path option (API 1.45 and later) and no host paths.

const (
	labelVolume = "io.astrabox.volume" // on a named volume: its name
	labelClaims = "io.astrabox.claims" // on a container: its named volumes, comma-separated
	dirVolumes  = "volumes"            // per box: staged mounts, one directory per volume
)

// volumeName is the engine's name of named volume claim.
func (p *Provider) volumeName(claim string) string { return "astrabox-" + p.hash + "-" + claim }

// volumeMounts returns the engine mounts of vols (in mount order) for box
// id and the named volumes they use, creating missing named volumes and
// staging host paths and local sub-paths. The caller removes the box
// (and so what was staged) when it fails.
func (p *Provider) volumeMounts(ctx context.Context, id string, vols []sandbox.Volume) ([]mount.Mount, []string, error) {
	var out []mount.Mount
	var claims []string
	for _, v := range sandbox.VolumesInMountOrder(vols) {
		m, err := p.volumeMount(ctx, id, v)
		if err != nil {
			return nil, nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out = append(out, m)
		if v.Claim != "" && !slices.Contains(claims, v.Claim) {
			claims = append(claims, v.Claim)
		}
	}
	return out, claims, nil
}

func (p *Provider) volumeMount(ctx context.Context, id string, v sandbox.Volume) (mount.Mount, error) {
	bind := func(fd int) (mount.Mount, error) {
		dir, err := p.stage(id, v, fd)
		if err != nil {
			return mount.Mount{}, err
		}
		return mount.Mount{Type: mount.TypeBind, Source: dir, Target: v.MountPath, ReadOnly: v.ReadOnly,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate, NonRecursive: true}}, nil
	}
	if v.HostPath != "" {
		if !p.local {
			return mount.Mount{}, sandbox.Errorf(sandbox.CodeCapability, "host-path volumes need a local engine")
		}
		fd, err := hostpath.Roots(p.cfg.HostPathRoots).Open(v.HostPath)
		if err != nil {
			return mount.Mount{}, err
		}
		defer unix.Close(fd)
		return p.withSubPath(fd, v.SubPath, bind)
	}
	vol, err := p.ensureVolume(ctx, v.Claim, v.MustExist)
	if err != nil {
		return mount.Mount{}, err
	}
	m := mount.Mount{Type: mount.TypeVolume, Source: vol.Name, Target: v.MountPath, ReadOnly: v.ReadOnly,
		VolumeOptions: &mount.VolumeOptions{NoCopy: true}}
	if v.SubPath == "" {
		return m, nil
	}
	if !p.local || vol.Driver != "local" || vol.Mountpoint == "" {
		m.VolumeOptions.Subpath = v.SubPath // the engine resolves it (API 1.45+)
		return m, nil
	}
	fd, err := unix.Open(vol.Mountpoint, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return mount.Mount{}, fmt.Errorf("open volume %s: %w", vol.Name, err)
	}
	defer unix.Close(fd)
	return p.withSubPath(fd, v.SubPath, bind)
}

// withSubPath resolves sub beneath fd (fd itself when sub is "") and
// hands the directory's descriptor to bind.
func (p *Provider) withSubPath(fd int, sub string, bind func(int) (mount.Mount, error)) (mount.Mount, error) {
	if sub == "" {
		return bind(fd)
	}
	sfd, err := hostpath.Beneath(fd, sub)
	if err != nil {
		return mount.Mount{}, fmt.Errorf("subPath: %w", err)
	}
	defer unix.Close(sfd)
	return bind(sfd)
}

// stage clones the directory fd names as a mount (nosuid, nodev, and
// read-only when v is) at DataDir/boxes/ID/volumes/NAME and returns that
// path.
func (p *Provider) stage(id string, v sandbox.Volume, fd int) (string, error) {
	dir := filepath.Join(p.boxDir(id), dirVolumes, v.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("stage volume: %w", err)
	}
	mnt, err := hostpath.CloneMount(fd)
	if err != nil {
		return "", err
	}
	defer unix.Close(mnt)
	attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
	if v.ReadOnly {
		attr.Attr_set |= unix.MOUNT_ATTR_RDONLY
	}
	if err := unix.MountSetattr(mnt, "", unix.AT_EMPTY_PATH, attr); err != nil {
		return "", fmt.Errorf("stage volume: %w", err)
	}
	if err := unix.MoveMount(mnt, "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
		return "", fmt.Errorf("stage volume: %w", err)
	}
	return dir, nil
}

// unstage detaches every staged volume of box id. It fails, and the
// caller must then keep the box directory, when one stays mounted:
// removing the directory would remove the host files under it.
func (p *Provider) unstage(id string) error {
	base := filepath.Join(p.boxDir(id), dirVolumes)
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list staged volumes: %w", err)
	}
	for _, e := range entries {
		dir := filepath.Join(base, e.Name())
		if err := unmountDir(dir); err != nil {
			return err
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("staged volume %s is not empty after unmount: %w", dir, err)
		}
	}
	return nil
}

// ensureVolume returns named volume claim, creating it unless mustExist.
func (p *Provider) ensureVolume(ctx context.Context, claim string, mustExist bool) (vol volumeRef, err error) {
	if err := sandbox.ValidateVolumeName(claim); err != nil {
		return vol, err
	}
	name := p.volumeName(claim)
	res, err := p.cli.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		if res.Volume.Labels[labelOwner] != p.cfg.Owner {
			return vol, sandbox.Errorf(sandbox.CodeConflict, "volume %s exists on the engine but is not this server's", name)
		}
		return volumeRef{res.Volume.Name, res.Volume.Driver, res.Volume.Mountpoint}, nil
	case !cerrdefs.IsNotFound(err):
		return vol, fmt.Errorf("inspect volume %s: %w", name, err)
	case mustExist:
		return vol, sandbox.Errorf(sandbox.CodeNotFound, "named volume %q does not exist", claim)
	}
	made, err := p.cli.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name,
		Labels: map[string]string{labelOwner: p.cfg.Owner, labelBackend: "docker", labelVolume: claim}})
	if err != nil {
		return vol, fmt.Errorf("create volume %s: %w", name, err)
	}
	p.log.Info("volume created", "backend", "docker", "volume", claim)
	return volumeRef{made.Volume.Name, made.Volume.Driver, made.Volume.Mountpoint}, nil
}

// volumeRef is what the backend needs of an engine volume.
type volumeRef struct{ Name, Driver, Mountpoint string }

// volumeUsers maps each named volume to the boxes whose containers use it.
func (p *Provider) volumeUsers(ctx context.Context) (map[string][]string, error) {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", labelOwner+"="+p.cfg.Owner)})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	out := map[string][]string{}
	for _, c := range res.Items {
		for _, claim := range strings.Split(c.Labels[labelClaims], ",") {
			if claim != "" {
				out[claim] = append(out[claim], c.Labels[labelID])
			}
		}
	}
	return out, nil
}

// ListVolumes implements sandbox.Volumer.
func (p *Provider) ListVolumes(ctx context.Context) ([]sandbox.VolumeInfo, error) {
	res, err := p.cli.VolumeList(ctx, client.VolumeListOptions{Filters: make(client.Filters).
		Add("label", labelOwner+"="+p.cfg.Owner).Add("label", labelVolume)})
	if err != nil {
		return nil, fmt.Errorf("list volumes: %w", err)
	}
	users, err := p.volumeUsers(ctx)
	if err != nil {
		return nil, err
	}
	var out []sandbox.VolumeInfo
	for _, v := range res.Items {
		claim := v.Labels[labelVolume]
		if v.Name != p.volumeName(claim) {
			continue
		}
		created, _ := time.Parse(time.RFC3339, v.CreatedAt)
		out = append(out, sandbox.VolumeInfo{Name: claim, Backend: p.Name(), CreatedAt: created.UTC(), InUse: users[claim]})
	}
	slices.SortFunc(out, func(a, b sandbox.VolumeInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// DeleteVolume implements sandbox.Volumer.
func (p *Provider) DeleteVolume(ctx context.Context, name string) error {
	if err := sandbox.ValidateVolumeName(name); err != nil {
		return err
	}
	users, err := p.volumeUsers(ctx)
	if err != nil {
		return err
	}
	if u := users[name]; len(u) > 0 {
		return sandbox.Errorf(sandbox.CodeConflict, "volume %q is mounted by sandbox %s", name, u[0])
	}
	res, err := p.cli.VolumeInspect(ctx, p.volumeName(name), client.VolumeInspectOptions{})
	if cerrdefs.IsNotFound(err) || (err == nil && res.Volume.Labels[labelOwner] != p.cfg.Owner) {
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
	}
	if err != nil {
		return fmt.Errorf("inspect volume %s: %w", name, err)
	}
	_, err = p.cli.VolumeRemove(ctx, p.volumeName(name), client.VolumeRemoveOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
	case cerrdefs.IsConflict(err):
		return sandbox.Errorf(sandbox.CodeConflict, "volume %q is in use", name)
	case err != nil:
		return fmt.Errorf("remove volume %s: %w", name, err)
	}
	p.log.Info("volume deleted", "backend", "docker", "volume", name)
	return nil
}

var _ sandbox.Volumer = (*Provider)(nil)
