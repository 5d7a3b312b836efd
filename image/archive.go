package image

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"

	"github.com/astrabox/astrabox/sandbox"
)

// source is a set of named files read by the docker-save and OCI layout
// importers: the files of a directory, or the members of a tar archive.
type source interface {
	// open opens the file name (a clean relative slash path); a missing
	// file is an error satisfying errors.Is(err, fs.ErrNotExist). The
	// caller closes the result.
	open(name string) (io.ReadCloser, error)
	// has reports whether name exists.
	has(name string) bool
}

// dirSource is a directory: an OCI image layout on disk. Symbolic links in
// it may not lead outside it.
type dirSource struct{ root *os.Root }

func (d dirSource) open(name string) (io.ReadCloser, error) { return d.root.Open(name) }

func (d dirSource) has(name string) bool {
	_, err := d.root.Stat(name)
	return err == nil
}

// tarSource is an uncompressed tar archive on disk, indexed once; members
// are read in place with no copy.
type tarSource struct {
	f       *os.File
	members map[string]member
}

type member struct {
	off, size int64
	link      string // for links: the member it stands for
	dir       bool
}

// indexTar lists the members of the tar archive f. Names are cleaned;
// links are kept, to be resolved on open, and so are members with names
// that climb out of the archive, which nothing can open. It leaves f's
// offset anywhere.
func indexTar(f *os.File) (*tarSource, error) {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("seek: %w", err)
	}
	ts := &tarSource{f: f, members: make(map[string]member)}
	tr := tar.NewReader(f) // an *os.File: tar skips member data by seeking
	for {
		hdr, err := tr.Next()
		if err == io.EOF && len(ts.members) == 0 {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "empty archive")
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "not a valid tar archive: %v", err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
			off, err := f.Seek(0, io.SeekCurrent)
			if err != nil {
				return nil, fmt.Errorf("seek: %w", err)
			}
			ts.members[name] = member{off: off, size: hdr.Size}
		case tar.TypeDir:
			ts.members[name] = member{dir: true}
		case tar.TypeSymlink:
			link := hdr.Linkname
			if !path.IsAbs(link) {
				link = path.Join(path.Dir(name), link)
			}
			ts.members[name] = member{link: link}
		case tar.TypeLink:
			ts.members[name] = member{link: hdr.Linkname}
		}
	}
	return ts, nil
}

// resolve follows links to a regular member.
func (ts *tarSource) resolve(name string) (member, bool) {
	for range 16 {
		m, ok := ts.members[name]
		if !ok || m.dir {
			return member{}, false
		}
		if m.link == "" {
			return m, true
		}
		next, err := cleanName(m.link)
		if err != nil {
			return member{}, false
		}
		name = next
	}
	return member{}, false
}

func (ts *tarSource) open(name string) (io.ReadCloser, error) {
	m, ok := ts.resolve(name)
	if !ok {
		return nil, fmt.Errorf("%s: %w", name, fs.ErrNotExist)
	}
	return io.NopCloser(io.NewSectionReader(ts.f, m.off, m.size)), nil
}

func (ts *tarSource) has(name string) bool {
	_, ok := ts.resolve(name)
	return ok
}

// spool writes r decompressed into the new file dst, stopping with
// PAYLOAD_TOO_LARGE past maxBytes when that is positive, and returns dst
// opened for reading. The caller closes it and removes dst.
func spool(dst string, r io.Reader, maxBytes int64) (*os.File, error) {
	f, err := os.OpenFile(dst, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create spool file: %w", err)
	}
	src := r
	if maxBytes > 0 {
		src = io.LimitReader(r, maxBytes+1)
	}
	n, err := io.Copy(f, src)
	if err == nil && maxBytes > 0 && n > maxBytes {
		err = sandbox.Errorf(sandbox.CodePayloadTooLarge, "decompressed archive exceeds the limit of %d bytes", maxBytes)
	}
	if err != nil {
		f.Close()
		var se *sandbox.Error
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "decompress archive: %v", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("seek spool file: %w", err)
	}
	return f, nil
}
