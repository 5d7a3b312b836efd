// Package imagearchive writes image archives without an engine or a
// registry: the docker-archive format (`docker save`'s) that `docker load`
// and `ctr images import` take.
package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
)

// WriteBinary writes to path the archive of image ref holding only bin,
// as /astrabox (mode 0755, owned by root), which is also the image's
// entrypoint: the kubernetes backend's execd image.
func WriteBinary(path, ref string, bin []byte) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "astrabox", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	if _, err := lw.Write(bin); err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	if err := lw.Close(); err != nil {
		return fmt.Errorf("image layer: %w", err)
	}
	ls := sha256.Sum256(layer.Bytes())
	diff := hex.EncodeToString(ls[:])
	cfg, err := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/astrabox"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diff}}})
	if err != nil {
		return fmt.Errorf("image config: %w", err)
	}
	cs := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cs[:]) + ".json"
	manifest, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{ref}, "Layers": []string{diff + "/layer.tar"}}})
	if err != nil {
		return fmt.Errorf("image manifest: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("image archive: %w", err)
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {cfgName, cfg}, {diff + "/layer.tar", layer.Bytes()}} {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("image archive %s: %w", path, err)
		}
		if _, err := w.Write(e.data); err != nil {
			return fmt.Errorf("image archive %s: %w", path, err)
		}
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("image archive %s: %w", path, err)
	}
	return nil
}
