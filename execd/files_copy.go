package execd

import (
	"io"
	"os"
	"path/filepath"
	"syscall"

	"github.com/astrabox/astrabox/sandbox"
)

// copyAcross copies src (a file, symbolic link or directory tree) to dst on
// another filesystem: into a temporary entry beside dst, renamed into place
// once complete, so dst never holds a partial copy. An existing directory
// at dst is refused, as rename would.
func copyAcross(src, dst string) error {
	fi, err := os.Lstat(src)
	if err != nil {
		return fileError("copy", src, err)
	}
	if dfi, err := os.Lstat(dst); err == nil && dfi.IsDir() {
		return sandbox.Errorf(sandbox.CodeAlreadyExists, "move %s to %s: target is an existing directory", src, dst)
	}
	parent := filepath.Dir(dst)
	tmp, err := os.MkdirTemp(parent, ".astrabox-move-*")
	if err != nil {
		return fileError("create temporary directory in", parent, err)
	}
	defer os.RemoveAll(tmp)
	staged := filepath.Join(tmp, "entry")
	if err := copyEntry(src, staged, fi); err != nil {
		return err
	}
	if err := os.Rename(staged, dst); err != nil {
		return fileError("move copy of "+src+" to", dst, err)
	}
	syncDir(parent)
	return nil
}

// copyEntry copies one entry described by fi (from Lstat) and, for a
// directory, everything under it.
func copyEntry(src, dst string, fi os.FileInfo) error {
	switch {
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return fileError("read link", src, err)
		}
		if err := os.Symlink(target, dst); err != nil {
			return fileError("create link", dst, err)
		}
	case fi.IsDir():
		if err := os.Mkdir(dst, 0o700); err != nil {
			return fileError("create directory", dst, err)
		}
		entries, err := os.ReadDir(src)
		if err != nil {
			return fileError("read directory", src, err)
		}
		for _, e := range entries {
			efi, err := e.Info()
			if err != nil {
				return fileError("stat", filepath.Join(src, e.Name()), err)
			}
			if err := copyEntry(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), efi); err != nil {
				return err
			}
		}
	case fi.Mode().IsRegular():
		if err := copyFileData(src, dst); err != nil {
			return err
		}
	default:
		return sandbox.Errorf(sandbox.CodeInvalidPath, "cannot move %s across filesystems: it is not a file, directory or symbolic link", src)
	}
	return copyAttrs(dst, fi)
}

// copyFileData copies the bytes of regular file src to a new file dst and
// syncs it.
func copyFileData(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fileError("open", src, err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fileError("create", dst, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fileError("copy "+src+" to", dst, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fileError("sync", dst, err)
	}
	if err := out.Close(); err != nil {
		return fileError("close", dst, err)
	}
	return nil
}

// copyAttrs gives dst the owner (where permitted), mode and times of fi.
func copyAttrs(dst string, fi os.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		// Only root may give files away; others keep their own ownership.
		if err := os.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil && os.Geteuid() == 0 {
			return fileError("chown", dst, err)
		}
	}
	if fi.Mode()&os.ModeSymlink != 0 {
		return nil
	}
	if err := os.Chmod(dst, fi.Mode()&(os.ModePerm|os.ModeSetuid|os.ModeSetgid|os.ModeSticky)); err != nil {
		return fileError("chmod", dst, err)
	}
	if err := os.Chtimes(dst, fi.ModTime(), fi.ModTime()); err != nil {
		return fileError("set times of", dst, err)
	}
	return nil
}
