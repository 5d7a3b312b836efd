package image

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// Whiteouts, as the OCI image spec and Docker write them.
const (
	whPrefix = ".wh."         // ".wh.name" deletes name from lower layers
	whOpaque = ".wh..wh..opq" // empties its directory of lower layers' entries
	whMeta   = ".wh..wh."     // other AUFS bookkeeping, ignored
)

// whiteout applies the whiteout entry base in dir. It removes what lower
// layers put there, never what the current layer wrote, whatever the order
// of entries in the layer. A whiteout in a missing directory does nothing.
func (x *extractor) whiteout(dir, base string) error {
	var name string
	if base != whOpaque {
		if strings.HasPrefix(base, whMeta) {
			return nil
		}
		name = strings.TrimPrefix(base, whPrefix)
		if name == "" || name == "." || name == ".." || strings.Contains(name, "/") {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid whiteout %q", base)
		}
		if _, ok := x.layer[path.Join(dir, name)]; ok {
			return nil
		}
	}
	x.t.invalidate() // what follows may remove directories
	dfd, err := x.t.openDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !x.t.isRoot(dfd) {
		defer unix.Close(dfd)
	}
	if base == whOpaque {
		return x.opaque(dfd, dir)
	}
	return removeAllAt(dfd, name)
}

// opaque removes from the directory dfd (at rel) everything the current
// layer did not write, descending into the directories it keeps.
func (x *extractor) opaque(dfd int, rel string) error {
	names, err := readDirNames(dfd)
	if err != nil {
		return err
	}
	for _, name := range names {
		p := path.Join(rel, name)
		_, written := x.layer[p]
		_, holds := x.ancestors[p]
		if !written && !holds {
			if err := removeAllAt(dfd, name); err != nil {
				return err
			}
			continue
		}
		cfd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // kept and not a directory
		}
		err = x.opaque(cfd, p)
		unix.Close(cfd)
		if err != nil {
			return err
		}
	}
	return nil
}
