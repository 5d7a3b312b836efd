package imagearchive

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteBinary reads the archive back: one manifest naming the tag,
// the config whose name is its digest and whose diff id is the layer's,
// and a layer holding only the binary.
func TestWriteBinary(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.tar")
	bin := []byte("\x7fELF not really")
	if err := WriteBinary(path, "example.local/execd:1", bin); err != nil {
		t.Fatal(err)
	}
	files := readTar(t, mustRead(t, path))
	var manifest []struct {
		Config   string
		RepoTags []string
		Layers   []string
	}
	if err := json.Unmarshal(files["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest %s: %v", files["manifest.json"], err)
	}
	m := manifest[0]
	if len(m.RepoTags) != 1 || m.RepoTags[0] != "example.local/execd:1" || len(m.Layers) != 1 {
		t.Fatalf("manifest %+v", m)
	}
	cfg := files[m.Config]
	if sum := sha256.Sum256(cfg); hex.EncodeToString(sum[:])+".json" != m.Config {
		t.Fatalf("config %s is not named by its digest", m.Config)
	}
	var c struct {
		Config struct{ Entrypoint []string }
		Rootfs struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		t.Fatal(err)
	}
	layer := files[m.Layers[0]]
	if sum := sha256.Sum256(layer); len(c.Rootfs.DiffIDs) != 1 || c.Rootfs.DiffIDs[0] != "sha256:"+hex.EncodeToString(sum[:]) {
		t.Fatalf("diff ids %v do not name the layer", c.Rootfs.DiffIDs)
	}
	if len(c.Config.Entrypoint) != 1 || c.Config.Entrypoint[0] != "/astrabox" {
		t.Fatalf("entrypoint %v", c.Config.Entrypoint)
	}
	inLayer := readTar(t, layer)
	if len(inLayer) != 1 || !bytes.Equal(inLayer["astrabox"], bin) {
		t.Fatalf("layer holds %d files", len(inLayer))
	}
}

func mustRead(t *testing.T, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readTar(t *testing.T, b []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	r := tar.NewReader(bytes.NewReader(b))
	for {
		h, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = data
	}
}
