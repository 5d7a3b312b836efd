// Package image is AstraBox's image store: root file systems imported from
// a root file system tarball, a `docker save` archive or an OCI image
// layout, or pulled from an OCI registry, each kept as a directory that the
// native backend mounts read-only as the lower layer of a box's overlay.
//
// Layout of the store's directory:
//
//	NAME+TAG/meta.json     an image's Info
//	NAME+TAG/rootfs/       its root file system
//	.tmp-*/                the work directory of an import or removal in progress
//	.retired/NAME+TAG.N/   versions replaced by Import or Pull with Replace
//
// Images are immutable: a new version is built in a work directory and
// renamed into place whole, never modified in place, so a box running on
// the old version keeps its lower layer. The built-in image "host" (the
// host's own root file system, provided by the backends) is reserved.
//
// Image directories are mode 0700: a root file system may hold setuid
// programs, which only a box (mounted nosuid) should reach.
package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// Formats of an image's origin, as Info.Format records them.
const (
	FormatRootFS   = "rootfs-tar"
	FormatDocker   = "docker-archive"
	FormatOCI      = "oci-layout"
	FormatRegistry = "registry"
	FormatBuiltIn  = "built-in"
	FormatSnapshot = "snapshot"
)

// Names in the store's directory.
const (
	metaFile   = "meta.json"
	rootfsDir  = "rootfs"
	workPrefix = ".tmp-"
	retiredDir = ".retired"
)

// Info describes an image.
type Info struct {
	// Name is "repo:tag", or "host" for the built-in image.
	Name string `json:"name"`
	// Digest identifies the content: the manifest digest of an OCI layout
	// or registry image, the config digest (image ID) of a docker-save
	// archive, the sha256 of the uncompressed tar of a root file system
	// tarball.
	Digest string `json:"digest,omitempty"`
	// Size is the bytes of file content in the root file system.
	Size int64 `json:"size"`
	// Format is where the image came from: one of the Format constants.
	Format string `json:"format"`
	// Source is the imported file or directory, or the registry reference.
	Source string `json:"source,omitempty"`
	// Platform is "os/arch[/variant]" as the image config states it.
	Platform string `json:"platform,omitempty"`
	// Layers is the number of layers applied.
	Layers int `json:"layers,omitempty"`
	// Created is when the image was imported.
	Created time.Time `json:"created,omitzero"`
	// Config is how to run the image, when the archive had an image config.
	Config *Config `json:"config,omitempty"`
	// Labels are key-value pairs of the image's maker (a snapshot's
	// record: see Derive).
	Labels map[string]string `json:"labels,omitempty"`
	// BuiltIn marks the host image, which has no directory in the store.
	BuiltIn bool `json:"built_in,omitempty"`
	// RootFS is the directory of the root file system (not stored).
	RootFS string `json:"rootfs,omitempty"`
}

// Store is a directory of images. It is safe for concurrent use, also by
// several processes on one directory.
type Store struct {
	dir string
	log *slog.Logger
}

// Open opens the store in dir, making it (mode 0700) when missing, and
// removes the work directories of imports that died. A nil logger
// discards logs.
func Open(dir string, logger *slog.Logger) (*Store, error) {
	if dir == "" {
		return nil, errors.New("image store: no directory given")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return nil, fmt.Errorf("image store: %w", err)
	}
	s := &Store{dir: abs, log: logger}
	s.sweep()
	return s, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) imageDir(ref Ref) string { return filepath.Join(s.dir, ref.dirName()) }

func hostInfo() Info {
	return Info{Name: HostName, Format: FormatBuiltIn, BuiltIn: true}
}

func notFound(name string) error {
	return sandbox.Errorf(sandbox.CodeImageNotFound, "image %q not found", name)
}

// Get returns the Info of the image name ("repo" means "repo:latest").
// Errors: INVALID_REQUEST_BODY for an invalid name, IMAGE_NOT_FOUND.
func (s *Store) Get(name string) (Info, error) {
	ref, err := ParseName(name)
	if err != nil {
		return Info{}, err
	}
	if ref.IsHost() {
		if ref.Tag != DefaultTag {
			return Info{}, notFound(name)
		}
		return hostInfo(), nil
	}
	return s.read(ref)
}

func (s *Store) read(ref Ref) (Info, error) {
	dir := s.imageDir(ref)
	raw, err := os.ReadFile(filepath.Join(dir, metaFile))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, notFound(ref.String())
	}
	if err != nil {
		return Info{}, fmt.Errorf("read metadata of %s: %w", ref, err)
	}
	var info Info
	if err := json.Unmarshal(raw, &info); err != nil {
		return Info{}, fmt.Errorf("parse metadata of %s: %w", ref, err)
	}
	info.RootFS = filepath.Join(dir, rootfsDir)
	return info, nil
}

// Resolve returns the directory of the root file system of image name, for
// native.Config.Images. Errors: IMAGE_NOT_FOUND; INVALID_REQUEST_BODY for
// an invalid name and for "host", which the backends provide themselves.
func (s *Store) Resolve(name string) (string, error) {
	ref, err := ParseName(name)
	if err != nil {
		return "", err
	}
	if ref.IsHost() {
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "image %q is built in: it has no directory in the store", name)
	}
	info, err := s.read(ref)
	if err != nil {
		return "", err
	}
	return info.RootFS, nil
}

// List returns the built-in host image, then the stored images by name.
// An image whose metadata cannot be read is logged and left out.
func (s *Store) List(ctx context.Context) ([]Info, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("list images: %w", err)
	}
	var out []Info
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		ref, ok := parseDirName(e.Name())
		if !ok {
			continue
		}
		info, err := s.read(ref)
		if err != nil {
			s.log.Warn("unreadable image left out of the list", "image", ref.String(), "err", err)
			continue
		}
		out = append(out, info)
	}
	slices.SortFunc(out, func(a, b Info) int { return strings.Compare(a.Name, b.Name) })
	return append([]Info{hostInfo()}, out...), nil
}

// Remove deletes image name. It does not know about boxes: one still
// running on the image loses its lower layer's files, so callers remove
// only images no box uses (Replace, by contrast, is safe while boxes run).
// Errors: INVALID_REQUEST_BODY for an invalid name or "host",
// IMAGE_NOT_FOUND.
func (s *Store) Remove(ctx context.Context, name string) error {
	ref, err := ParseName(name)
	if err != nil {
		return err
	}
	if ref.IsHost() {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "the built-in image %q cannot be removed", HostName)
	}
	w, err := s.newWork()
	if err != nil {
		return err
	}
	defer s.discard(w)
	// Renamed away first, so the name is gone at once and for good even
	// if the deletion below is cut short (the next Open finishes it).
	if err := os.Rename(s.imageDir(ref), filepath.Join(w.dir, "removed")); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return notFound(ref.String())
		}
		return fmt.Errorf("remove image %s: %w", ref, err)
	}
	s.log.Info("image removed", "image", ref.String())
	return nil
}

// Prune deletes the versions that Replace retired and returns how many. Call
// it when no box runs on an old version any more (a box keeps running on
// the version it started on). ctx is checked between versions.
func (s *Store) Prune(ctx context.Context) (int, error) {
	dir := filepath.Join(s.dir, retiredDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list retired images: %w", err)
	}
	n := 0
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return n, err
		}
		w, err := s.newWork()
		if err != nil {
			return n, err
		}
		err = os.Rename(filepath.Join(dir, e.Name()), filepath.Join(w.dir, "retired"))
		s.discard(w)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return n, fmt.Errorf("prune %s: %w", e.Name(), err)
		}
		if err == nil {
			n++
		}
	}
	s.log.Info("retired images pruned", "count", n)
	return n, nil
}
