// Package hostpath resolves host directories for sandbox volumes through
// file descriptors only, never following a symbolic link: a volume's host
// path is resolved beneath the allowed root it lies under, and its
// sub-path beneath the volume, with openat2(RESOLVE_BENEATH |
// RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS). A link anywhere on the way,
// or a ".." that would climb out, is refused; so a path another process
// swaps for a link between a check and a use cannot redirect the mount:
// callers mount what the descriptor names (open_tree on it), not a path.
package hostpath

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// resolveFlags refuse every kind of link and any escape from the dirfd.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// Roots are the host directories under which volumes may name host paths:
// absolute, clean, and free of symbolic links themselves (see Check).
type Roots []string

// Check refuses roots that are not absolute and clean, that are "/", or
// that are (or pass through) a symbolic link: a root is compared with
// volume paths as written, so it must be its own canonical form.
func (r Roots) Check() error {
	for _, root := range r {
		if !filepath.IsAbs(root) || filepath.Clean(root) != root {
			return fmt.Errorf("host path root %q: want an absolute, clean path", root)
		}
		if root == "/" {
			return errors.New("host path root \"/\" would allow every host path")
		}
		real, err := filepath.EvalSymlinks(root)
		if err != nil {
			return fmt.Errorf("host path root %q: %w", root, err)
		}
		if real != root {
			return fmt.Errorf("host path root %q is reached through a symbolic link (it is %s)", root, real)
		}
	}
	return nil
}

// Open returns an O_PATH descriptor of the directory path, which must lie
// under one of r, resolved beneath that root without following any link.
// The caller closes it. Errors: CodeInvalidRequest for a path under no
// root (naming the roots), a link on the way, or a non-directory;
// CodeNotFound for a missing directory.
func (r Roots) Open(path string) (int, error) {
	if !filepath.IsAbs(path) || filepath.Clean(path) != path {
		return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "host path %q must be absolute and clean", path)
	}
	// The longest root wins, so a nested root is resolved from itself.
	best := ""
	for _, root := range r {
		if sandbox.HostPathUnder(path, root) && len(root) > len(best) {
			best = root
		}
	}
	if best == "" {
		allowed := "none: host paths are disabled"
		if len(r) > 0 {
			allowed = strings.Join(slices.Sorted(slices.Values(r)), ", ")
		}
		return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "host path %s is not under a root this server allows (allowed: %s)", path, allowed)
	}
	rootFD, err := unix.Open(best, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0)
	if err != nil {
		return -1, fmt.Errorf("open host path root %s: %w", best, err)
	}
	defer unix.Close(rootFD)
	rel, _ := filepath.Rel(best, path)
	fd, err := Beneath(rootFD, rel)
	if err != nil {
		return -1, fmt.Errorf("host path %s: %w", path, err)
	}
	return fd, nil
}

// Beneath returns an O_PATH descriptor of the directory rel (a relative
// path; "" or "." for dirfd itself) resolved beneath dirfd without
// following any link and without leaving dirfd. The caller closes it.
// Errors: CodeInvalidRequest for an absolute rel, a link or ".." escape on
// the way, or a non-directory; CodeNotFound for a missing directory.
func Beneath(dirfd int, rel string) (int, error) {
	if rel == "" {
		rel = "."
	}
	if strings.HasPrefix(rel, "/") || strings.IndexByte(rel, 0) >= 0 {
		return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "path %q must be relative", rel)
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC, Resolve: resolveFlags}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		switch {
		case err == nil:
			return fd, nil
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.EAGAIN):
			continue // a concurrent rename; RESOLVE_BENEATH asks to retry
		case errors.Is(err, unix.ENOENT):
			return -1, sandbox.Errorf(sandbox.CodeNotFound, "directory %q does not exist", rel)
		case errors.Is(err, unix.ELOOP):
			return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "%q passes through a symbolic link: refusing to follow it", rel)
		case errors.Is(err, unix.EXDEV):
			return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "%q leads outside its directory", rel)
		case errors.Is(err, unix.ENOTDIR):
			return -1, sandbox.Errorf(sandbox.CodeInvalidRequest, "%q is not a directory", rel)
		}
		return -1, fmt.Errorf("open %q: %w", rel, err)
	}
}

// MkdirBeneath makes the directory rel beneath dirfd (mode 0755, each
// missing component in turn, never through a link) and returns an O_PATH
// descriptor of it, as Beneath. Errors as Beneath's.
func MkdirBeneath(dirfd int, rel string) (int, error) {
	if rel == "" || rel == "." {
		return Beneath(dirfd, ".")
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		prefix := strings.Join(parts[:i+1], "/")
		fd, err := Beneath(dirfd, prefix)
		if err == nil {
			if i == len(parts)-1 {
				return fd, nil
			}
			unix.Close(fd)
			continue
		}
		if sandbox.CodeOf(err) != sandbox.CodeNotFound {
			return -1, err
		}
		parent, err := Beneath(dirfd, strings.Join(parts[:i], "/"))
		if err != nil {
			return -1, err
		}
		err = unix.Mkdirat(parent, parts[i], 0o755)
		unix.Close(parent)
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("mkdir %q: %w", prefix, err)
		}
		if i == len(parts)-1 {
			return Beneath(dirfd, prefix)
		}
	}
	return Beneath(dirfd, rel)
}

// CloneMount returns a detached mount (open_tree OPEN_TREE_CLONE) of the
// directory fd names, without the mounts beneath it, for move_mount. The
// caller closes it.
func CloneMount(fd int) (int, error) {
	mnt, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return -1, fmt.Errorf("clone mount: %w", err)
	}
	return mnt, nil
}
