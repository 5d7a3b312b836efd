// Package boxbin keeps the copy of the astrabox binary that a backend's
// sandboxes run (as init and execd). The copy sits alone on a small tmpfs
// under the backend's data dir, owned by root and mode 0755, so that boxes
// can neither write nor replace it, rebuilding the binary on the host
// never changes what running boxes execute, and a bind of it shows no host
// path in a box's mountinfo (only "/astrabox" of its own file system).
package boxbin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Name is the copy's file name in its directory.
const Name = "astrabox"

// Install mounts the tmpfs on dir (creating dir, once: an existing mount
// point is kept) and copies src to dir/Name unless the copy there has the
// same size and is not older. It returns the copy's path. Needs root.
func Install(src, dir string) (string, error) {
	si, err := os.Stat(src)
	if err != nil {
		return "", fmt.Errorf("stat %s: %w", src, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("install binary: %w", err)
	}
	if err := mountOnce(dir, fmt.Sprintf("mode=0755,size=%d", 3*si.Size()+(1<<20))); err != nil {
		return "", err
	}
	dst := filepath.Join(dir, Name)
	if di, err := os.Stat(dst); err == nil && di.Size() == si.Size() && !di.ModTime().Before(si.ModTime()) {
		return dst, nil
	}
	if err := copyFile(src, dir, dst); err != nil {
		return "", fmt.Errorf("install binary: %w", err)
	}
	return dst, nil
}

// Release unmounts what Install mounted on dir (every stacked mount); a
// dir that is not a mount point, or is gone, is fine.
func Release(dir string) error {
	for {
		err := unix.Unmount(dir, unix.MNT_DETACH)
		if err == nil {
			continue
		}
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
}

// mountOnce mounts a tmpfs with opts on dir unless dir is a mount point.
func mountOnce(dir, opts string) error {
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
	if err := unix.Mount("astrabox-bin", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount %s: %w", dir, err)
	}
	return nil
}

// copyFile copies src to dst through a temporary file in dir, so that a
// box starting meanwhile sees the old copy or the new one, never half.
func copyFile(src, dir, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".astrabox-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	_, err = io.Copy(tmp, in)
	if err == nil {
		err = tmp.Chmod(0o755)
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), dst)
	}
	return err
}
