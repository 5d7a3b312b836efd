package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// tree gives access to a directory tree through file descriptors only:
// every path is resolved one component at a time with openat(O_NOFOLLOW),
// so a symbolic link anywhere on the way, and ".." (which callers never
// pass), can never lead outside the tree or anywhere else inside it.
//
// It caches the descriptor of the last directory it resolved, since archive
// entries come grouped by directory. Callers that remove a directory must
// call invalidate. A tree is not safe for concurrent use.
type tree struct {
	root     int
	cacheDir string
	cacheFD  int
}

// openTree opens dir, which must be a directory and not a symbolic link.
// The caller closes the tree.
func openTree(dir string) (*tree, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	return &tree{root: fd, cacheFD: -1}, nil
}

func (t *tree) close() {
	t.invalidate()
	unix.Close(t.root)
}

// invalidate forgets the cached directory descriptor.
func (t *tree) invalidate() {
	if t.cacheFD >= 0 {
		unix.Close(t.cacheFD)
	}
	t.cacheDir, t.cacheFD = "", -1
}

// forget drops the cached descriptor if it is of rel or a directory under
// it, which is about to be removed.
func (t *tree) forget(rel string) {
	if t.cacheDir == rel || strings.HasPrefix(t.cacheDir, rel+"/") {
		t.invalidate()
	}
}

// dir returns a descriptor of the directory rel ("." for the root; a clean
// relative slash path without ".."), owned by the tree: the caller must not
// close it, and it stays valid until the next call of dir or invalidate.
// With create, missing directories are made (mode 0755, owned by the
// caller); without, a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist). A component that is a symbolic link or
// not a directory is an INVALID_REQUEST_BODY error.
func (t *tree) dir(rel string, create bool) (int, error) {
	if rel == "." || rel == "" {
		return t.root, nil
	}
	if rel == t.cacheDir && t.cacheFD >= 0 {
		return t.cacheFD, nil
	}
	fd, err := t.walk(rel, create)
	if err != nil {
		return -1, err
	}
	t.invalidate()
	t.cacheDir, t.cacheFD = rel, fd
	return fd, nil
}

// openDir is dir without the cache: the caller closes the descriptor it
// returns unless it is the root's (check with isRoot).
func (t *tree) openDir(rel string) (int, error) {
	if rel == "." || rel == "" {
		return t.root, nil
	}
	return t.walk(rel, false)
}

func (t *tree) isRoot(fd int) bool { return fd == t.root }

func (t *tree) walk(rel string, create bool) (int, error) {
	cur := t.root
	parts := strings.Split(rel, "/")
	for i, name := range parts {
		next, err := openChildDir(cur, name, create)
		if cur != t.root {
			unix.Close(cur)
		}
		if err != nil {
			prefix := strings.Join(parts[:i+1], "/")
			if errors.Is(err, fs.ErrNotExist) {
				return -1, fmt.Errorf("%s: %w", prefix, fs.ErrNotExist)
			}
			return -1, describeDirErr(prefix, err)
		}
		cur = next
	}
	return cur, nil
}

// errNotDir marks a path component that cannot be walked through.
var errNotDir = errors.New("not a directory")

// openChildDir opens the directory name in parent without following a
// symbolic link, making it first when create is set and it is missing.
func openChildDir(parent int, name string, create bool) (int, error) {
	const flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
	fd, err := unix.Openat(parent, name, flags, 0)
	if err == unix.ENOENT && create {
		if err := unix.Mkdirat(parent, name, 0o755); err != nil && err != unix.EEXIST {
			return -1, fmt.Errorf("mkdir: %w", err)
		}
		if fd, err = unix.Openat(parent, name, flags, 0); err == nil {
			// Mkdirat applied the umask; implicit directories are 0755.
			if err := unix.Fchmod(fd, 0o755); err != nil {
				unix.Close(fd)
				return -1, fmt.Errorf("chmod: %w", err)
			}
		}
	}
	switch err {
	case nil:
		return fd, nil
	case unix.ENOENT:
		return -1, fs.ErrNotExist
	case unix.ELOOP, unix.ENOTDIR:
		var st unix.Stat_t
		if unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return -1, errSymlink
		}
		return -1, errNotDir
	default:
		return -1, err
	}
}

// errSymlink marks a path component that is a symbolic link.
var errSymlink = errors.New("is a symbolic link")

func describeDirErr(prefix string, err error) error {
	switch {
	case errors.Is(err, errSymlink):
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "%q is a symbolic link: refusing to resolve a path through it", prefix)
	case errors.Is(err, errNotDir):
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "%q is not a directory", prefix)
	}
	return fmt.Errorf("open directory %q: %w", prefix, err)
}

// lstatAt reports the type of name in dir without following a symbolic
// link; exists is false when there is nothing there.
func lstatAt(dir int, name string) (mode uint32, exists bool, err error) {
	var st unix.Stat_t
	switch err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err {
	case nil:
		return st.Mode & unix.S_IFMT, true, nil
	case unix.ENOENT:
		return 0, false, nil
	default:
		return 0, false, fmt.Errorf("stat %q: %w", name, err)
	}
}

// removeAllAt removes name from dir and, when it is a directory, all it
// holds, never following a symbolic link. Missing is not an error.
func removeAllAt(dir int, name string) error {
	mode, exists, err := lstatAt(dir, name)
	if err != nil || !exists {
		return err
	}
	if mode != unix.S_IFDIR {
		if err := unix.Unlinkat(dir, name, 0); err != nil && err != unix.ENOENT {
			return fmt.Errorf("remove %q: %w", name, err)
		}
		return nil
	}
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("open %q: %w", name, err)
	}
	names, err := readDirNames(fd)
	if err == nil {
		for _, n := range names {
			if err = removeAllAt(fd, n); err != nil {
				break
			}
		}
	}
	unix.Close(fd)
	if err != nil {
		return fmt.Errorf("%s/%w", name, err)
	}
	if err := unix.Unlinkat(dir, name, unix.AT_REMOVEDIR); err != nil && err != unix.ENOENT {
		return fmt.Errorf("remove %q: %w", name, err)
	}
	return nil
}

// readDirNames lists the directory dir through a descriptor of its own, so
// the offset of dir is left alone.
func readDirNames(dir int) ([]string, error) {
	fd, err := unix.Openat(dir, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open directory: %w", err)
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("read directory: %w", err)
	}
	return names, nil
}
