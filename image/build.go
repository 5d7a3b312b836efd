package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/sandbox"
)

// work is a private directory of the store for one operation. It holds an
// exclusive flock while in use, so sweep (in any process) can tell an
// abandoned work directory from a busy one.
type work struct {
	dir  string
	lock *os.File
}

func (s *Store) newWork() (*work, error) {
	dir, err := os.MkdirTemp(s.dir, workPrefix)
	if err != nil {
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	f, err := os.Open(dir)
	if err == nil {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			f.Close()
		}
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock work directory: %w", err)
	}
	return &work{dir: dir, lock: f}, nil
}

// discard deletes w and all it holds (os.RemoveAll never follows symbolic
// links), logging a failure: the next Open retries.
func (s *Store) discard(w *work) {
	if err := os.RemoveAll(w.dir); err != nil {
		s.log.Warn("work directory left behind", "dir", w.dir, "err", err)
	}
	w.lock.Close()
}

// sweep removes work directories that no live operation holds.
func (s *Store) sweep() {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), workPrefix) {
			continue
		}
		dir := filepath.Join(s.dir, e.Name())
		f, err := os.Open(dir)
		if err != nil {
			continue
		}
		if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
			if err := os.RemoveAll(dir); err != nil {
				s.log.Warn("abandoned work directory not removed", "dir", dir, "err", err)
			} else {
				s.log.Info("abandoned work directory removed", "dir", dir)
			}
		}
		f.Close()
	}
}

// build is one image being made in a work directory.
type build struct {
	s        *Store
	ref      Ref
	opts     ImportOptions
	platform platform
	w        *work
	rootfs   string
	x        *extractor
	info     Info
}

// prepare validates the name and options of a new image and refuses early
// a name that exists when opts do not ask to replace it.
func (s *Store) prepare(name string, opts ImportOptions) (Ref, platform, error) {
	ref, err := ParseName(name)
	if err != nil {
		return Ref{}, platform{}, err
	}
	if ref.IsHost() {
		return Ref{}, platform{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "image name %q is reserved for the built-in host image", HostName)
	}
	if opts.MaxBytes < 0 {
		return Ref{}, platform{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "negative MaxBytes")
	}
	plat, err := parsePlatform(opts.Platform)
	if err != nil {
		return Ref{}, platform{}, err
	}
	if !opts.Replace {
		if _, err := os.Lstat(s.imageDir(ref)); err == nil {
			return Ref{}, platform{}, alreadyExists(ref)
		}
	}
	return ref, plat, nil
}

func alreadyExists(ref Ref) error {
	return sandbox.Errorf(sandbox.CodeAlreadyExists, "image %q already exists (replace it explicitly)", ref.String())
}

// build makes image ref: fill writes its root file system through b.x and
// sets the format-specific fields of b.info; then the image's size and
// metadata are written, everything is synced to disk, and the image
// directory is renamed into place. On any error nothing is left behind.
func (s *Store) build(ctx context.Context, ref Ref, plat platform, opts ImportOptions, fill func(context.Context, *build) error) (Info, error) {
	start := time.Now()
	w, err := s.newWork()
	if err != nil {
		return Info{}, err
	}
	defer s.discard(w)
	imageDir := filepath.Join(w.dir, "image")
	rootfs := filepath.Join(imageDir, rootfsDir)
	if err := os.Mkdir(imageDir, 0o700); err != nil {
		return Info{}, fmt.Errorf("create image directory: %w", err)
	}
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return Info{}, fmt.Errorf("create rootfs directory: %w", err)
	}
	t, err := openTree(rootfs)
	if err != nil {
		return Info{}, err
	}
	defer t.close()
	b := &build{s: s, ref: ref, opts: opts, platform: plat, w: w, rootfs: rootfs, x: newExtractor(t, s.log, opts.MaxBytes)}
	if err := fill(ctx, b); err != nil {
		return Info{}, err
	}
	if b.x.skipped > 0 {
		s.log.Info("special files skipped", "image", ref.String(), "count", b.x.skipped)
	}
	info := b.info
	info.Name = ref.String()
	info.Created = time.Now().UTC().Truncate(time.Second)
	if info.Size, err = diskUsage(rootfs); err != nil {
		return Info{}, err
	}
	raw, err := json.MarshalIndent(info, "", "  ")
	if err != nil {
		return Info{}, fmt.Errorf("encode metadata: %w", err)
	}
	if err := os.WriteFile(filepath.Join(imageDir, metaFile), append(raw, '\n'), 0o644); err != nil {
		return Info{}, fmt.Errorf("write metadata: %w", err)
	}
	if err := unix.Syncfs(t.root); err != nil {
		return Info{}, fmt.Errorf("sync image: %w", err)
	}
	if err := s.commit(imageDir, ref, opts.Replace); err != nil {
		return Info{}, err
	}
	info.RootFS = filepath.Join(s.imageDir(ref), rootfsDir)
	s.log.Info("image stored", "image", info.Name, "format", info.Format, "digest", info.Digest,
		"size", info.Size, "layers", info.Layers, "duration", time.Since(start).Round(time.Millisecond))
	return info, nil
}

// commit renames the finished image directory src into place. A name in
// use is ALREADY_EXISTS unless replace is set; then the two directories
// are exchanged atomically (renameat2 RENAME_EXCHANGE) and the old one is
// retired, so no moment exists without an image under the name.
func (s *Store) commit(src string, ref Ref, replace bool) error {
	dst := s.imageDir(ref)
	// A plain rename never replaces an image: its directory is not empty.
	err := os.Rename(src, dst)
	if err == nil {
		return syncDir(s.dir)
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("commit image: %w", err)
	}
	if !replace {
		return alreadyExists(ref)
	}
	err = unix.Renameat2(unix.AT_FDCWD, src, unix.AT_FDCWD, dst, unix.RENAME_EXCHANGE)
	if err == unix.EINVAL || err == unix.ENOSYS {
		// No RENAME_EXCHANGE on this file system: retire, then rename.
		if err := s.retire(dst, ref); err != nil {
			return err
		}
		if err := os.Rename(src, dst); err != nil {
			return fmt.Errorf("commit image: %w", err)
		}
		return syncDir(s.dir)
	}
	if err != nil {
		return fmt.Errorf("exchange image directories: %w", err)
	}
	if err := s.retire(src, ref); err != nil {
		return err
	}
	return syncDir(s.dir)
}

// retire moves a replaced version of ref out of the way, for Prune.
func (s *Store) retire(dir string, ref Ref) error {
	rdir := filepath.Join(s.dir, retiredDir)
	if err := os.MkdirAll(rdir, 0o700); err != nil {
		return fmt.Errorf("retire old image: %w", err)
	}
	dst := filepath.Join(rdir, ref.dirName()+"."+strconv.FormatInt(time.Now().UnixNano(), 10))
	if err := os.Rename(dir, dst); err != nil {
		return fmt.Errorf("retire old image: %w", err)
	}
	s.log.Info("old image version retired", "image", ref.String(), "dir", dst)
	return nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// diskUsage adds up the sizes of the regular files under dir, counting
// hard-linked files once. It follows no symbolic link.
func diskUsage(dir string) (int64, error) {
	var total int64
	seen := make(map[uint64]bool)
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
			if seen[st.Ino] {
				return nil
			}
			seen[st.Ino] = true
		}
		total += fi.Size()
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measure image: %w", err)
	}
	return total, nil
}
