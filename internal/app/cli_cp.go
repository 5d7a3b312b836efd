package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// maxCopyDepth bounds how deep a directory copy goes out of a box (a box
// may nest directories without end).
const maxCopyDepth = 256

// copier copies files and directory trees between this machine and a
// box, with the meaning cp -r and docker cp give them:
//
//   - a destination that is an existing directory, or that ends in "/",
//     receives the source under the source's base name; any other
//     destination is the copy's own name (a new directory for a directory);
//   - a directory is copied with everything under it, directories first,
//     each file and directory keeping its permission bits; copying into
//     an existing directory merges, replacing files of the same name;
//   - a symbolic link named as the source is followed; symbolic links and
//     special files (FIFOs, sockets, devices) inside a copied tree are not
//     copied: each is named on standard error, and the copy, once done with
//     everything else, fails saying how many were left out;
//   - each file copied out of a box is bounded by limit (0: none), as a
//     single file is; names a box lists are untrusted: a name that is not
//     one plain path element fails the copy, and nothing is ever written
//     outside the local destination (writes go through an os.Root, which
//     refuses "..", absolute names and symbolic links that leave it).
//
// A failed file copied out is removed; what was copied before it stays.
type copier struct {
	x       *execdclient.Client
	limit   int64
	stderr  io.Writer
	skipped int
}

// stdinTo uploads stdin to the file dpath of the box.
func (c *copier) stdinTo(ctx context.Context, stdin io.Reader, dpath string) error {
	if strings.HasSuffix(dpath, "/") {
		return fmt.Errorf("cp: standard input has no name: give the file's path in the box, not the directory %s", dpath)
	}
	return c.x.Upload(ctx, dpath, stdin, execdclient.UploadOptions{})
}

// toStdout writes the file spath of the box to out.
func (c *copier) toStdout(ctx context.Context, spath string, out io.Writer) error {
	return copyOut(ctx, c.x, spath, out, nil, c.limit)
}

// in copies the local file or directory src to dpath in the box.
func (c *copier) in(ctx context.Context, src, dpath string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	target := dpath
	into := strings.HasSuffix(dpath, "/")
	if !into {
		if into, err = c.boxIsDir(ctx, dpath); err != nil {
			return err
		}
	}
	if into {
		name := filepath.Base(filepath.Clean(src))
		if !plainName(name) {
			return fmt.Errorf("cp: %s has no name to copy into %s under; give the destination's full path", src, dpath)
		}
		target = path.Join(dpath, name)
	}
	switch {
	case fi.Mode().IsRegular():
		return c.upload(ctx, src, target, fi)
	case fi.IsDir():
		return c.uploadTree(ctx, src, target, fi)
	}
	return fmt.Errorf("cp: %s is not a regular file or a directory", src)
}

// boxIsDir reports whether p exists in the box as a directory.
func (c *copier) boxIsDir(ctx context.Context, p string) (bool, error) {
	infos, err := c.x.Info(ctx, p)
	if execdclient.CodeOf(err) == sandbox.CodeFileNotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cp: %s: %w", p, err)
	}
	return infos[p].Type == "directory", nil
}

// upload copies the regular file src to target in the box.
func (c *copier) upload(ctx context.Context, src, target string, fi fs.FileInfo) error {
	f, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer f.Close()
	size := fi.Size()
	if err := c.x.Upload(ctx, target, f, execdclient.UploadOptions{Size: &size, Mode: modeDigits(fi.Mode())}); err != nil {
		return fmt.Errorf("cp: %s to %s: %w", src, target, err)
	}
	return nil
}

// uploadTree copies the local directory root to target in the box.
// Directories are created writable by their owner while they are filled
// and get their own permission bits at the end.
func (c *copier) uploadTree(ctx context.Context, root, target string, rootInfo fs.FileInfo) error {
	later := map[string]wire.Permission{}
	mkdir := func(dir string, mode fs.FileMode) error {
		if err := c.x.MakeDirs(ctx, map[string]wire.Permission{dir: {Mode: modeDigits(mode | 0o700)}}); err != nil {
			return fmt.Errorf("cp: create %s in the box: %w", dir, err)
		}
		if mode.Perm()|0o700 != mode.Perm() {
			later[dir] = wire.Permission{Mode: modeDigits(mode)}
		}
		return nil
	}
	if err := mkdir(target, rootInfo.Mode()); err != nil {
		return err
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		bp := path.Join(target, filepath.ToSlash(rel))
		fi, err := d.Info()
		if err != nil {
			return fmt.Errorf("cp: %w", err)
		}
		switch {
		case d.IsDir():
			return mkdir(bp, fi.Mode())
		case d.Type().IsRegular():
			return c.upload(ctx, p, bp, fi)
		}
		c.skip(p, fi.Mode())
		return nil
	})
	if err != nil {
		return err
	}
	if len(later) > 0 {
		if err := c.x.Chmod(ctx, later); err != nil {
			return fmt.Errorf("cp: set directory modes in the box: %w", err)
		}
	}
	return nil
}

// out copies the file or directory spath of the box to the local dst.
func (c *copier) out(ctx context.Context, spath, dst string) error {
	infos, err := c.x.Info(ctx, spath)
	if err != nil {
		return fmt.Errorf("cp: %s: %w", spath, err)
	}
	info, ok := infos[spath]
	if !ok {
		return fmt.Errorf("cp: %s: no such file in the box", spath)
	}
	target := dst
	into := strings.HasSuffix(dst, "/") || strings.HasSuffix(dst, string(filepath.Separator))
	if st, err := os.Stat(dst); err == nil && st.IsDir() {
		into = true
	}
	if into {
		name := path.Base(path.Clean(spath))
		if !plainName(name) {
			return fmt.Errorf("cp: %s has no name to copy into %s under; give the destination's full path", spath, dst)
		}
		target = filepath.Join(dst, name)
	}
	if info.Type == "directory" {
		return c.downloadTree(ctx, spath, target, info.Mode)
	}
	f, err := os.Create(target)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if err := copyOut(ctx, c.x, spath, f, f, c.limit); err != nil {
		f.Close()
		_ = os.Remove(target) // nothing half-copied left behind
		return err
	}
	return f.Close()
}

// downloadTree copies the box's directory dir into the local directory
// target, created unless it exists (a merge).
func (c *copier) downloadTree(ctx context.Context, dir, target string, mode int) error {
	if err := os.Mkdir(target, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cp: %w", err)
	}
	if st, err := os.Stat(target); err != nil {
		return fmt.Errorf("cp: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("cp: %s exists and is not a directory", target)
	}
	root, err := os.OpenRoot(target)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	defer root.Close()
	if err := c.downloadDir(ctx, root, dir, ".", 1); err != nil {
		return err
	}
	if err := root.Chmod(".", permOf(mode, 0o755)); err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	return nil
}

// downloadDir copies the entries of the box's directory dir into rel
// under root.
func (c *copier) downloadDir(ctx context.Context, root *os.Root, dir, rel string, depth int) error {
	if depth > maxCopyDepth {
		return fmt.Errorf("cp: %s: directories nest deeper than %d levels", dir, maxCopyDepth)
	}
	entries, err := c.x.ListDir(ctx, dir, 1)
	if err != nil {
		return fmt.Errorf("cp: list %s: %w", dir, err)
	}
	for _, e := range entries {
		name := e.Path[strings.LastIndexByte(e.Path, '/')+1:]
		if !strings.Contains(e.Path, "/") || !plainName(name) {
			return fmt.Errorf("cp: the box listed %q in %s, which is not a plain name in it; refusing the copy", visible(e.Path), dir)
		}
		from, to := path.Join(dir, name), path.Join(rel, name)
		switch e.Type {
		case "directory":
			if err := root.Mkdir(to, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("cp: %w", err)
			}
			if st, err := root.Lstat(to); err != nil || !st.IsDir() {
				return fmt.Errorf("cp: %s in the destination exists and is not a directory", to)
			}
			if err := c.downloadDir(ctx, root, from, to, depth+1); err != nil {
				return err
			}
			if err := root.Chmod(to, permOf(e.Mode, 0o755)); err != nil {
				return fmt.Errorf("cp: %w", err)
			}
		case "file":
			if err := c.downloadFile(ctx, root, from, to, e.Mode); err != nil {
				return err
			}
		default:
			c.skipNamed(from, e.Type)
		}
	}
	return nil
}

// downloadFile copies the box's regular file from to rel under root; a
// failed copy leaves nothing behind.
func (c *copier) downloadFile(ctx context.Context, root *os.Root, from, rel string, mode int) error {
	f, err := root.OpenFile(rel, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("cp: %w", err)
	}
	if err := copyOut(ctx, c.x, from, f, f, c.limit); err != nil {
		f.Close()
		_ = root.Remove(rel)
		return err
	}
	if err := f.Chmod(permOf(mode, 0o644)); err != nil {
		f.Close()
		return fmt.Errorf("cp: %w", err)
	}
	return f.Close()
}

// skip notes a local entry that is not copied.
func (c *copier) skip(p string, mode fs.FileMode) {
	kind := "special file"
	if mode&fs.ModeSymlink != 0 {
		kind = "symbolic link"
		if to, err := os.Readlink(p); err == nil {
			p += " -> " + to
		}
	}
	c.skipNamed(p, kind)
}

// skipNamed notes an entry of kind that is not copied.
func (c *copier) skipNamed(p, kind string) {
	c.skipped++
	fmt.Fprintf(c.stderr, "cp: not copied: %s (%s)\n", visible(p), kind)
}

// plainName reports whether name is one path element that names an entry
// of its directory: not empty, ".", ".." and without a separator or NUL.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsRune(name, '/') && !strings.ContainsRune(name, filepath.Separator) && !strings.ContainsRune(name, 0)
}

// modeDigits writes mode's permission bits as execd wants them: octal
// digits read as a decimal number (0o755 is 755).
func modeDigits(mode fs.FileMode) int {
	n, _ := strconv.Atoi(strconv.FormatUint(uint64(mode.Perm()), 8))
	return n
}

// permOf reads execd's octal digits back (755 is 0o755); what is not a
// permission gives def.
func permOf(digits int, def fs.FileMode) fs.FileMode {
	n, err := strconv.ParseUint(strconv.Itoa(digits), 8, 32)
	if err != nil || digits <= 0 {
		return def
	}
	return fs.FileMode(n) & fs.ModePerm
}
