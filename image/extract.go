package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// extractor applies layer tarballs, in order, to a root file system.
//
// Nothing it writes lands outside the tree: entry names are cleaned and a
// name that climbs out with ".." is refused (absolute names are taken as
// relative to the root); parents are resolved without following symbolic
// links, so a link made by an earlier entry or layer is never written
// through; an existing entry is unlinked, never opened, before a new one
// takes its name; hard links must name an existing non-directory inside
// the tree. Device nodes and FIFOs are skipped (and logged); modes
// (setuid, setgid and sticky bits included), owners, symbolic links, hard
// links and modification times are kept. Extended attributes are not.
type extractor struct {
	t        *tree
	log      *slog.Logger
	maxBytes int64 // bound on file content written; 0: none
	written  int64 // file content written so far, over all layers
	noChown  bool  // chown is not permitted (not root): owners are dropped

	// Per layer: the paths it wrote and their ancestors (for whiteouts),
	// and directory times to set once the layer's entries are all written.
	layer     map[string]struct{}
	ancestors map[string]struct{}
	dirTimes  []dirTime

	skipped int // device nodes and FIFOs, over all layers
}

type dirTime struct {
	rel string
	ts  []unix.Timespec
}

func newExtractor(t *tree, log *slog.Logger, maxBytes int64) *extractor {
	return &extractor{t: t, log: log, maxBytes: maxBytes}
}

// applyLayer reads a tar stream to its end-of-archive marker and applies
// its entries, whiteouts included. ctx is checked between entries. Errors
// about the archive's content are INVALID_REQUEST_BODY, exceeding maxBytes
// is PAYLOAD_TOO_LARGE; on error the tree is left half-written, for the
// caller to discard.
func (x *extractor) applyLayer(ctx context.Context, r io.Reader) error {
	x.layer = make(map[string]struct{})
	x.ancestors = make(map[string]struct{})
	x.dirTimes = x.dirTimes[:0]
	tr := tar.NewReader(r)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "read tar: %v", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return fmt.Errorf("entry %q: %w", hdr.Name, err)
		}
	}
	x.finishLayer()
	return nil
}

// cleanName maps an archive entry name to a clean slash path relative to
// the root ("." for the root itself). Leading slashes are dropped, so
// absolute names land inside the root; a name that climbs out with ".." is
// an error, as are empty names and NUL bytes.
func cleanName(name string) (string, error) {
	if name == "" || strings.IndexByte(name, 0) >= 0 {
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid entry name %q", name)
	}
	p := path.Clean(strings.TrimLeft(name, "/"))
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "unsafe entry name %q: it leads outside the image", name)
	}
	return p, nil
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	rel, err := cleanName(hdr.Name)
	if err != nil {
		return err
	}
	if rel == "." {
		if hdr.Typeflag == tar.TypeDir {
			return x.setMeta(x.t.root, ".", ".", hdr)
		}
		return nil
	}
	if strings.HasPrefix(rel, whMeta) && rel != whOpaque {
		return nil // AUFS bookkeeping, such as the .wh..wh.plnk directory
	}
	dir, base := path.Dir(rel), path.Base(rel)
	if strings.HasPrefix(base, whPrefix) {
		return x.whiteout(dir, base)
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.mkdir(rel, dir, base, hdr)
	case tar.TypeReg, tar.TypeGNUSparse:
		err = x.file(rel, dir, base, hdr, r)
	case tar.TypeSymlink:
		err = x.symlink(rel, dir, base, hdr)
	case tar.TypeLink:
		err = x.hardlink(rel, dir, base, hdr)
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		x.skipped++
		x.log.Info("skipped special file", "path", rel, "type", typeName(hdr.Typeflag))
		return nil
	case tar.TypeXGlobalHeader:
		return nil
	default:
		x.log.Warn("skipped entry of unknown type", "path", rel, "type", string(hdr.Typeflag))
		return nil
	}
	if err != nil {
		return err
	}
	x.record(rel)
	return nil
}

func typeName(t byte) string {
	switch t {
	case tar.TypeChar:
		return "char_device"
	case tar.TypeBlock:
		return "block_device"
	case tar.TypeFifo:
		return "fifo"
	}
	return string(t)
}

// record notes that the current layer wrote rel.
func (x *extractor) record(rel string) {
	x.layer[rel] = struct{}{}
	for d := path.Dir(rel); d != "."; d = path.Dir(d) {
		if _, ok := x.ancestors[d]; ok {
			break
		}
		x.ancestors[d] = struct{}{}
	}
}

// clear makes room for a new entry rel, called name in dir: a directory is
// kept when keepDir is set (exists reports it), anything else is removed.
func (x *extractor) clear(dir int, name, rel string, keepDir bool) (exists bool, err error) {
	mode, found, err := lstatAt(dir, name)
	if err != nil || !found {
		return false, err
	}
	if mode == unix.S_IFDIR {
		if keepDir {
			return true, nil
		}
		x.t.forget(rel)
		return false, removeAllAt(dir, name)
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil {
		return false, fmt.Errorf("remove existing %q: %w", name, err)
	}
	return false, nil
}

func (x *extractor) mkdir(rel, dir, base string, hdr *tar.Header) error {
	pfd, err := x.t.dir(dir, true)
	if err != nil {
		return err
	}
	exists, err := x.clear(pfd, base, rel, true)
	if err != nil {
		return err
	}
	if !exists {
		if err := unix.Mkdirat(pfd, base, 0o700); err != nil {
			return fmt.Errorf("mkdir: %w", err)
		}
	}
	return x.setMeta(pfd, base, rel, hdr)
}

func (x *extractor) file(rel, dir, base string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size < 0 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "negative size")
	}
	if x.maxBytes > 0 && hdr.Size > x.maxBytes-x.written {
		return sandbox.Errorf(sandbox.CodePayloadTooLarge, "image content exceeds the limit of %d bytes", x.maxBytes)
	}
	pfd, err := x.t.dir(dir, true)
	if err != nil {
		return err
	}
	if _, err := x.clear(pfd, base, rel, false); err != nil {
		return err
	}
	fd, err := unix.Openat(pfd, base, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create: %w", err)
	}
	f := os.NewFile(uintptr(fd), rel)
	n, err := io.CopyN(f, r, hdr.Size)
	x.written += n
	if err != nil {
		f.Close()
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "truncated archive: %v", err)
		}
		return fmt.Errorf("write: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close: %w", err)
	}
	return x.setMeta(pfd, base, rel, hdr)
}

func (x *extractor) symlink(rel, dir, base string, hdr *tar.Header) error {
	if hdr.Linkname == "" || strings.IndexByte(hdr.Linkname, 0) >= 0 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid symbolic link target %q", hdr.Linkname)
	}
	pfd, err := x.t.dir(dir, true)
	if err != nil {
		return err
	}
	if _, err := x.clear(pfd, base, rel, false); err != nil {
		return err
	}
	// The target is stored as data and never followed by the extractor.
	if err := unix.Symlinkat(hdr.Linkname, pfd, base); err != nil {
		return fmt.Errorf("symlink: %w", err)
	}
	return x.setMeta(pfd, base, rel, hdr)
}

func (x *extractor) hardlink(rel, dir, base string, hdr *tar.Header) error {
	target, err := cleanName(hdr.Linkname)
	if err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "unsafe hard link target %q: it leads outside the image", hdr.Linkname)
	}
	if target == rel {
		return nil
	}
	if target == "." {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "hard link to the image root")
	}
	tfd, err := x.t.openDir(path.Dir(target))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "hard link target %q does not exist in the image", hdr.Linkname)
		}
		return fmt.Errorf("hard link target: %w", err)
	}
	if !x.t.isRoot(tfd) {
		defer unix.Close(tfd)
	}
	tbase := path.Base(target)
	mode, exists, err := lstatAt(tfd, tbase)
	switch {
	case err != nil:
		return err
	case !exists:
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "hard link target %q does not exist in the image", hdr.Linkname)
	case mode == unix.S_IFDIR:
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "hard link target %q is a directory", hdr.Linkname)
	}
	pfd, err := x.t.dir(dir, true)
	if err != nil {
		return err
	}
	if _, err := x.clear(pfd, base, rel, false); err != nil {
		return err
	}
	// Flags 0: a target that is a symbolic link is linked itself, not followed.
	if err := unix.Linkat(tfd, tbase, pfd, base, 0); err != nil {
		return fmt.Errorf("link: %w", err)
	}
	return nil
}

// setMeta applies the owner, mode and times of hdr to name in dir (whose
// path from the root is rel); for a directory the times are set when the
// layer is done, since writing its entries would change them.
func (x *extractor) setMeta(dir int, name, rel string, hdr *tar.Header) error {
	if hdr.Uid < 0 || hdr.Gid < 0 || int64(hdr.Uid) > 1<<32-2 || int64(hdr.Gid) > 1<<32-2 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid owner %d:%d", hdr.Uid, hdr.Gid)
	}
	if !x.noChown {
		// Owner first: chown clears setuid and setgid bits, chmod sets them.
		err := unix.Fchownat(dir, name, hdr.Uid, hdr.Gid, unix.AT_SYMLINK_NOFOLLOW)
		if err == unix.EPERM && os.Geteuid() != 0 {
			x.noChown = true
			x.log.Warn("not running as root: file owners of the image are not kept")
		} else if err != nil {
			return fmt.Errorf("chown: %w", err)
		}
	}
	if hdr.Typeflag != tar.TypeSymlink {
		// Fchmodat follows symbolic links; name is not one (checked by type).
		if err := unix.Fchmodat(dir, name, uint32(hdr.Mode)&0o7777, 0); err != nil {
			return fmt.Errorf("chmod: %w", err)
		}
	}
	mtime := hdr.ModTime
	atime := hdr.AccessTime
	if atime.IsZero() {
		atime = mtime
	}
	ts := []unix.Timespec{timespec(atime), timespec(mtime)}
	if hdr.Typeflag == tar.TypeDir {
		x.dirTimes = append(x.dirTimes, dirTime{rel: rel, ts: ts})
		return nil
	}
	if err := unix.UtimesNanoAt(dir, name, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return fmt.Errorf("set times: %w", err)
	}
	return nil
}

func timespec(t time.Time) unix.Timespec {
	if t.IsZero() {
		return unix.Timespec{Sec: 0}
	}
	return unix.Timespec{Sec: t.Unix(), Nsec: int64(t.Nanosecond())}
}

// finishLayer sets directory times, deepest first. A directory that a
// later entry replaced or removed is passed over.
func (x *extractor) finishLayer() {
	for i := len(x.dirTimes) - 1; i >= 0; i-- {
		d := x.dirTimes[i]
		if d.rel == "." {
			unix.UtimesNanoAt(x.t.root, ".", d.ts, 0)
			continue
		}
		pfd, err := x.t.dir(path.Dir(d.rel), false)
		if err != nil {
			continue
		}
		if mode, ok, _ := lstatAt(pfd, path.Base(d.rel)); ok && mode == unix.S_IFDIR {
			unix.UtimesNanoAt(pfd, path.Base(d.rel), d.ts, unix.AT_SYMLINK_NOFOLLOW)
		}
	}
	x.dirTimes = x.dirTimes[:0]
}
