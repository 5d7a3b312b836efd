package docker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Layout of DataDir.
const (
	dirBoxes  = "boxes"      // one directory per box id, mode 0700
	dirBin    = "bin"        // tmpfs holding the binary boxes run
	dirRun    = "run"        // per box: tmpfs bound into the box at boxRun
	stateFile = "state.json" // per box: boxState, mode 0600
	sockName  = "execd.sock" // in the run directory
	tokenName = "token"      // in the run directory until execd has read it
)

// Where things are inside a box.
const (
	boxHome      = "/.astrabox"
	boxBinary    = boxHome + "/astrabox"
	boxRun       = boxHome + "/run"
	boxToken     = boxHome + "/token" // copied in for a remote engine
	boxWorkspace = "/workspace"
)

// runDirBytes bounds the run directory: it holds a socket and a token, and
// a box must not be able to fill the host's disk through it.
const runDirBytes = 64 << 10

func (p *Provider) boxDir(id string) string { return filepath.Join(p.cfg.DataDir, dirBoxes, id) }
func (p *Provider) runDir(id string) string { return filepath.Join(p.boxDir(id), dirRun) }

// mountTmpfs mounts a tmpfs (nosuid, nodev and flags) with opts on dir
// unless dir is a mount point already. Binds of it into boxes inherit its
// flags.
func mountTmpfs(dir string, flags uintptr, opts string) error {
	var st, parent unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Stat(filepath.Dir(dir), &parent); err != nil {
		return fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	if st.Dev != parent.Dev {
		return nil
	}
	if err := unix.Mount("astrabox", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|flags, opts); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %w", dir, err)
	}
	return nil
}

// unmountDir detaches whatever is mounted on dir; a dir that is not a
// mount point, or is gone, is fine.
func unmountDir(dir string) error {
	for {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if err == nil {
			continue // stacked mounts: take them all
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
}

// makeRunDir creates the box's run directory on a tmpfs of its own. It
// is bound into the box, whose root can write to it: the tmpfs bounds what
// that costs the host and shows no host path in the box.
func (p *Provider) makeRunDir(id string) error {
	dir := p.runDir(id)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("create run directory: %w", err)
	}
	return mountTmpfs(dir, unix.MS_NOEXEC, fmt.Sprintf("mode=0700,size=%d,nr_inodes=64", runDirBytes))
}

// removeBoxDir unmounts the box's run directory and staged volumes and
// removes its directory.
func (p *Provider) removeBoxDir(id string) error {
	if err := unmountDir(p.runDir(id)); err != nil {
		return err
	}
	if err := p.unstage(id); err != nil {
		return err
	}
	if err := os.RemoveAll(p.boxDir(id)); err != nil {
		return fmt.Errorf("remove box directory: %w", err)
	}
	return nil
}

// dialRunSocket connects to the execd socket in dir without following a
// link: the box's root can write to that directory and could leave a
// symbolic link to some other socket of the host in place of execd's. The
// socket is opened with O_PATH|O_NOFOLLOW, checked to be a socket, and
// reached through its /proc/self/fd entry, which names that very inode.
func dialRunSocket(ctx context.Context, dir string) (net.Conn, error) {
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dfd)
	fd, err := unix.Openat(dfd, sockName, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open execd socket: %w", err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat execd socket: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return nil, fmt.Errorf("execd socket in %s is not a socket (mode %#o)", dir, st.Mode)
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", "/proc/self/fd/"+strconv.Itoa(fd))
}
