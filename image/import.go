package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/astrabox/astrabox/sandbox"
)

// ImportOptions tune Import and Pull.
type ImportOptions struct {
	// Replace makes a new version of an existing image and swaps it in
	// atomically; without it an existing name is ALREADY_EXISTS.
	Replace bool
	// MaxBytes, when positive, bounds the file content written into the
	// root file system (all layers together) and the decompressed size of a
	// compressed archive; going past it is PAYLOAD_TOO_LARGE.
	MaxBytes int64
	// Platform picks the image of a multi-platform OCI layout or registry
	// image: "os/arch[/variant]", by default linux and the architecture of
	// the running binary (linux/amd64 on x86-64).
	Platform string
}

// Import stores the image in the file or directory at path as name
// ("repo" means "repo:latest"). The format is detected:
//   - a directory is an OCI image layout;
//   - a file, plain or compressed with gzip, zstd or bzip2 (told by its
//     magic bytes), is a tar archive: an OCI image layout if it holds
//     oci-layout and index.json, a `docker save` archive if it holds a
//     manifest.json in that format, else a root file system.
//
// Layers are applied in order with whiteouts honoured, safely (see
// extractor). ctx cancels the import; nothing is left behind on failure.
// Errors: INVALID_REQUEST_BODY for an invalid or reserved name, a missing
// or malformed archive and unsafe entries; ALREADY_EXISTS;
// PAYLOAD_TOO_LARGE past opts.MaxBytes; NOT_SUPPORTED for xz.
func (s *Store) Import(ctx context.Context, name, path string, opts ImportOptions) (Info, error) {
	ref, plat, err := s.prepare(name, opts)
	if err != nil {
		return Info{}, err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return Info{}, fmt.Errorf("import %s: %w", path, err)
	}
	return s.build(ctx, ref, plat, opts, func(ctx context.Context, b *build) error {
		b.info.Source = abs
		return b.importPath(ctx, abs)
	})
}

func (b *build) importPath(ctx context.Context, p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "import %s: %v", p, err)
		}
		return fmt.Errorf("import: %w", err)
	}
	if fi.IsDir() {
		root, err := os.OpenRoot(p)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		defer root.Close()
		b.info.Format = FormatOCI
		return b.importOCI(ctx, dirSource{root})
	}
	f, err := os.Open(p)
	if err != nil {
		return fmt.Errorf("import: %w", err)
	}
	defer f.Close()
	if f, err = b.seekableTar(f, fi.Mode().IsRegular()); err != nil {
		return err
	}
	defer f.Close()
	ts, err := indexTar(f)
	if err != nil {
		return err
	}
	if ts.has("oci-layout") && ts.has("index.json") {
		b.info.Format = FormatOCI
		return b.importOCI(ctx, ts)
	}
	if ts.has("manifest.json") {
		raw, err := readSmall(ts, "manifest.json")
		if err != nil {
			return err
		}
		if ms, ok := parseDockerManifest(raw); ok {
			b.info.Format = FormatDocker
			return b.importDocker(ctx, ts, ms)
		}
	}
	b.info.Format = FormatRootFS
	return b.importRootFS(ctx, f)
}

// seekableTar returns an uncompressed, seekable tar file: f itself when it
// is a plain regular file, or a decompressed copy of it in the work
// directory. The caller closes the result.
func (b *build) seekableTar(f *os.File, regular bool) (*os.File, error) {
	if regular {
		head := make([]byte, 8)
		n, err := io.ReadFull(f, head)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return nil, fmt.Errorf("read archive: %w", err)
		}
		if sniff(head[:n]) == uncompressed {
			g, err := os.Open(f.Name()) // the caller closes f
			if err != nil {
				return nil, fmt.Errorf("read archive: %w", err)
			}
			return g, nil
		}
	}
	dec, _, err := decompress(f)
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	return spool(filepath.Join(b.w.dir, "archive.tar"), dec, b.opts.MaxBytes)
}

// importRootFS extracts a root file system tarball as a single layer; its
// digest is the sha256 of the tar.
func (b *build) importRootFS(ctx context.Context, f *os.File) error {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	h := sha256.New()
	r := io.TeeReader(f, h)
	if err := b.x.applyLayer(ctx, r); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return fmt.Errorf("read archive: %w", err)
	}
	b.info.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	b.info.Layers = 1
	return nil
}

// applyBlob applies one layer blob, compressed or not, and reads it to the
// end, so that a verifying reader checks its digest.
func (b *build) applyBlob(ctx context.Context, r io.Reader) error {
	dec, _, err := decompress(r)
	if err != nil {
		return err
	}
	defer dec.Close()
	if err := b.x.applyLayer(ctx, dec); err != nil {
		return err
	}
	if _, err := io.Copy(io.Discard, dec); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "read layer: %v", err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "read layer: %v", err)
	}
	b.info.Layers++
	return nil
}
