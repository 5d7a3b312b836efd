package image

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// DeriveOptions tune Derive.
type DeriveOptions struct {
	// UIDBase is the host uid (and gid) that is 0 in the box whose upper
	// layer is read: owners are shifted down by it, and an owner outside
	// [UIDBase, UIDBase+65536) becomes 65534 (nobody).
	UIDBase uint32
	// MaxBytes bounds the file content read from the upper layer
	// (PAYLOAD_TOO_LARGE past it); 0 means no bound.
	MaxBytes int64
	// Labels are stored in the image's Info.
	Labels map[string]string
}

// Derive stores image name made of image base with an overlay upper
// directory applied over it: what a box wrote over base (files, links,
// directories, owners, modes and times; overlay whiteouts and opaque
// directories as deletions), which upper, a descriptor of that directory,
// holds. It is how the native backend snapshots a box.
//
// upper is read as hostile: through descriptors only, never following a
// link (links are stored as links), opening only regular files (with
// O_NOFOLLOW|O_NONBLOCK, checked to be the inode listed), skipping FIFOs,
// sockets and devices but whiteouts, bounded by opts.MaxBytes; a file that
// changes size while it is read fails the derive. The result is applied
// with the store's own safe extractor, as an imported layer is. The base's
// files are copied, so the new image stands alone. Errors: IMAGE_NOT_FOUND
// for base, ALREADY_EXISTS for name, PAYLOAD_TOO_LARGE.
func (s *Store) Derive(ctx context.Context, name, base string, upper int, opts DeriveOptions) (Info, error) {
	baseInfo, err := s.Get(base)
	if err != nil {
		return Info{}, err
	}
	if baseInfo.BuiltIn {
		return Info{}, sandbox.Errorf(sandbox.CodeNotSupported, "the built-in image %q cannot be derived from", base)
	}
	ref, plat, err := s.prepare(name, ImportOptions{})
	if err != nil {
		return Info{}, err
	}
	return s.build(ctx, ref, plat, ImportOptions{}, func(ctx context.Context, b *build) error {
		b.info = Info{Format: FormatSnapshot, Source: baseInfo.Name, Platform: baseInfo.Platform, Config: baseInfo.Config, Labels: opts.Labels}
		baseFD, err := unix.Open(baseInfo.RootFS, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open base image: %w", err)
		}
		defer unix.Close(baseFD)
		for _, tw := range []*treeWriter{{root: baseFD}, {root: upper, overlay: true, uidBase: opts.UIDBase, shift: true, max: opts.MaxBytes}} {
			if err := b.applyTree(ctx, tw); err != nil {
				return err
			}
			b.info.Layers++
		}
		return nil
	})
}

// applyTree streams the tree tw writes into the extractor as one layer.
func (b *build) applyTree(ctx context.Context, tw *treeWriter) error {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		w := tar.NewWriter(pw)
		err := tw.dir(ctx, w, tw.root, "")
		if err == nil {
			err = w.Close()
		}
		pw.CloseWithError(err)
		done <- err
	}()
	err := b.x.applyLayer(ctx, pr)
	if err == nil {
		_, err = io.Copy(io.Discard, pr)
	}
	pr.CloseWithError(errors.New("layer abandoned"))
	if werr := <-done; werr != nil {
		return werr
	}
	return err
}

// treeWriter writes a directory tree as a tar layer (see Derive).
type treeWriter struct {
	root    int
	overlay bool   // an overlay upper: whiteouts and opaque directories
	shift   bool   // shift owners down by uidBase
	uidBase uint32 // see DeriveOptions.UIDBase
	max, n  int64  // content bound (0: none) and bytes written
}

func (w *treeWriter) id(v uint32) int {
	if !w.shift {
		return int(v)
	}
	if v < w.uidBase || v-w.uidBase >= 65536 {
		return 65534
	}
	return int(v - w.uidBase)
}

// opaqueXattrs mark an opaque overlay directory (userxattr mounts, as in
// a user namespace, use the user. one).
var opaqueXattrs = []string{"user.overlay.opaque", "trusted.overlay.opaque"}

func isOpaque(fd int) bool {
	buf := make([]byte, 8)
	for _, x := range opaqueXattrs {
		n, err := unix.Fgetxattr(fd, x, buf)
		if err == nil && n == 1 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// dir writes the entries of directory fd (at rel in the layer).
func (w *treeWriter) dir(ctx context.Context, tw *tar.Writer, fd int, rel string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	names, err := readDirNames(fd)
	if err != nil {
		return fmt.Errorf("%s: %w", rel, err)
	}
	slices.Sort(names)
	if w.overlay && rel != "" && isOpaque(fd) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(rel, ".wh..wh..opq"), Mode: 0o600}); err != nil {
			return err
		}
	}
	for _, name := range names {
		if err := w.entry(ctx, tw, fd, rel, name); err != nil {
			return err
		}
	}
	return nil
}

func (w *treeWriter) entry(ctx context.Context, tw *tar.Writer, fd int, rel, name string) error {
	var st unix.Stat_t
	if err := unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil // gone meanwhile
		}
		return fmt.Errorf("stat %s: %w", path.Join(rel, name), err)
	}
	p := path.Join(rel, name)
	hdr := &tar.Header{Name: p, Mode: int64(st.Mode & 0o7777), Uid: w.id(st.Uid), Gid: w.id(st.Gid),
		ModTime: time.Unix(st.Mtim.Sec, st.Mtim.Nsec), Format: tar.FormatPAX}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		hdr.Typeflag, hdr.Name = tar.TypeDir, p+"/"
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("open %s: %w", p, err)
		}
		defer unix.Close(child)
		return w.dir(ctx, tw, child, p)
	case unix.S_IFREG:
		return w.file(tw, fd, name, hdr, &st)
	case unix.S_IFLNK:
		buf := make([]byte, unix.PathMax)
		n, err := unix.Readlinkat(fd, name, buf)
		if err != nil {
			return fmt.Errorf("readlink %s: %w", p, err)
		}
		hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, string(buf[:n])
		return tw.WriteHeader(hdr)
	case unix.S_IFCHR:
		if w.overlay && st.Rdev == 0 {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: path.Join(rel, ".wh."+name), Mode: 0o600})
		}
	}
	return nil // FIFOs, sockets and devices are not kept
}

// file writes the regular file name of dir, opened without following a
// link or blocking, and checked to be the inode fstatat saw.
func (w *treeWriter) file(tw *tar.Writer, dir int, name string, hdr *tar.Header, want *unix.Stat_t) error {
	fd, err := unix.Openat(dir, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("open %s: %w", hdr.Name, err)
	}
	f := os.NewFile(uintptr(fd), hdr.Name)
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return fmt.Errorf("stat %s: %w", hdr.Name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != want.Ino || st.Dev != want.Dev {
		return sandbox.Errorf(sandbox.CodeConflict, "%s changed while it was read", hdr.Name)
	}
	if w.max > 0 && w.n+st.Size > w.max {
		return sandbox.Errorf(sandbox.CodePayloadTooLarge, "the files to snapshot exceed %d bytes", w.max)
	}
	w.n += st.Size
	hdr.Typeflag, hdr.Size = tar.TypeReg, st.Size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, st.Size); err != nil {
		return sandbox.Errorf(sandbox.CodeConflict, "%s changed while it was read: %v", hdr.Name, err)
	}
	return nil
}
