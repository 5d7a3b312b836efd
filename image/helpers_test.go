package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// ent is a tar entry of a test archive; Type defaults to a regular file.
type ent struct {
	Name, Link, Body string
	Type             byte
	Mode             int64
	UID, GID         int
	Size             int64 // overrides len(Body) in the header; no data is written then
	ModTime          time.Time
}

var testTime = time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)

func reg(name, body string) ent       { return ent{Name: name, Body: body, Type: tar.TypeReg} }
func dir(name string) ent             { return ent{Name: name, Type: tar.TypeDir} }
func symlink(name, target string) ent { return ent{Name: name, Link: target, Type: tar.TypeSymlink} }
func hardlink(name, target string) ent {
	return ent{Name: name, Link: target, Type: tar.TypeLink}
}

// tarOfEntries writes entries as a tar archive. An entry with Size set gets a
// header only, and the archive ends there (truncated).
func tarOfEntries(t testing.TB, entries ...ent) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		typ := e.Type
		if typ == 0 {
			typ = tar.TypeReg
		}
		mode := e.Mode
		if mode == 0 {
			mode = 0o644
			if typ == tar.TypeDir {
				mode = 0o755
			}
		}
		mt := e.ModTime
		if mt.IsZero() {
			mt = testTime
		}
		h := &tar.Header{Name: e.Name, Linkname: e.Link, Typeflag: typ, Mode: mode, Uid: e.UID, Gid: e.GID, ModTime: mt, Format: tar.FormatPAX}
		if typ == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		if e.Size > 0 {
			h.Size = e.Size
			if err := tw.WriteHeader(h); err != nil {
				t.Fatal(err)
			}
			return buf.Bytes()
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			if _, err := tw.Write([]byte(e.Body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

type file struct {
	name string
	data []byte
}

// dockerSave assembles a `docker save` archive of one image.
func dockerSave(t testing.TB, config []byte, layers ...[]byte) []byte {
	t.Helper()
	cfgName := sha(config) + ".json"
	files := []file{{cfgName, config}}
	var paths []string
	for i, l := range layers {
		p := fmt.Sprintf("layer%d/layer.tar", i)
		paths = append(paths, p)
		files = append(files, file{p, l})
	}
	man, _ := json.Marshal([]dockerManifest{{Config: cfgName, RepoTags: []string{"test:latest"}, Layers: paths}})
	files = append(files, file{"manifest.json", man})
	return tarOf(t, files)
}

func tarOf(t testing.TB, files []file) []byte {
	var entries []ent
	for _, f := range files {
		entries = append(entries, reg(f.name, string(f.data)))
	}
	return tarOfEntries(t, entries...)
}

func imageConfig(env ...string) []byte {
	cfg := map[string]any{
		"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Env": env, "Entrypoint": []string{"/bin/sh"}, "WorkingDir": "/work", "User": "1000:1000"},
	}
	b, _ := json.Marshal(cfg)
	return b
}

// ociFiles assembles the files of an OCI image layout whose index lists
// one manifest per image; each image is a config and layer blobs.
type ociImage struct {
	config []byte
	layers [][]byte
	plat   *ociPlatform
}

func ociFiles(t testing.TB, imgs ...ociImage) []file {
	t.Helper()
	blobs := map[string][]byte{}
	add := func(mt string, b []byte) descriptor {
		d := "sha256:" + sha(b)
		blobs[d] = b
		return descriptor{MediaType: mt, Digest: d, Size: int64(len(b))}
	}
	var idx ociIndex
	idx.MediaType = mtOCIIndex
	for _, img := range imgs {
		man := ociManifest{MediaType: mtOCIManifest, Config: add("application/vnd.oci.image.config.v1+json", img.config)}
		for _, l := range img.layers {
			man.Layers = append(man.Layers, add("application/vnd.oci.image.layer.v1.tar+gzip", l))
		}
		raw, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": man.MediaType, "config": man.Config, "layers": man.Layers})
		d := add(mtOCIManifest, raw)
		d.Platform = img.plat
		idx.Manifests = append(idx.Manifests, d)
	}
	rawIdx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": idx.MediaType, "manifests": idx.Manifests})
	files := []file{{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)}, {"index.json", rawIdx}}
	var keys []string
	for k := range blobs {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		files = append(files, file{"blobs/sha256/" + strings.TrimPrefix(k, "sha256:"), blobs[k]})
	}
	return files
}

func writeDir(t testing.TB, root string, files []file) string {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(root, f.name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, f.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func writeFile(t testing.TB, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
}

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// importBytes writes an archive to a file beside the store and imports it.
func importBytes(t testing.TB, s *Store, name string, archive []byte, opts ImportOptions) (Info, error) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "archive")
	if err := os.WriteFile(p, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	return s.Import(context.Background(), name, p, opts)
}

func wantCode(t testing.TB, err error, code sandbox.Code) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got := sandbox.CodeOf(err); got != code {
		t.Fatalf("error %v: code %s, want %s", err, got, code)
	}
}

func readFile(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// snapshot records every path under root (but not under skip) with its
// type, mode, size, link target and, for small files, content.
func snapshot(t testing.TB, root string, skip ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if slices.Contains(skip, p) {
			return filepath.SkipDir
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%v %d", fi.Mode(), fi.Size())
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !d.IsDir() {
			desc += fmt.Sprintf(" links=%d", st.Nlink)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			l, _ := os.Readlink(p)
			desc += " -> " + l
		} else if fi.Mode().IsRegular() && fi.Size() < 1<<16 {
			b, _ := os.ReadFile(p)
			desc += " " + string(b)
		}
		if !d.IsDir() {
			desc += " " + fi.ModTime().String()
		}
		out[p] = desc
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return out
}

func diffSnapshots(t testing.TB, before, after map[string]string) {
	t.Helper()
	for p, d := range before {
		if after[p] != d {
			t.Errorf("outside the image changed: %s: %q, now %q", p, d, after[p])
		}
	}
	for p, d := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("outside the image appeared: %s (%s)", p, d)
		}
	}
}

// storeEntries lists the store's directory.
func storeEntries(t testing.TB, s *Store) []string {
	t.Helper()
	es, err := os.ReadDir(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func requireRoot(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (file owners); CI runs as root")
	}
}
