package image_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/app"
)

// run calls the astrabox CLI in-process.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = app.Main(context.Background(), args, app.IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb},
		func(string) string { return "" })
	return code, out.String(), errb.String()
}

func rootfsTar(t *testing.T, body string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755})
	tw.WriteHeader(&tar.Header{Name: "etc/motd", Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(body))})
	tw.Write([]byte(body))
	tw.Close()
	p := filepath.Join(t.TempDir(), "rootfs.tar")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCLI(t *testing.T) {
	data := t.TempDir()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	img, err := random.Image(256, 1)
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := name.ParseReference(host + "/tools/rnd:v3")
	if err := remote.Write(ref, img); err != nil {
		t.Fatal(err)
	}
	v1, v2 := rootfsTar(t, "one"), rootfsTar(t, "two")

	tests := []struct {
		args     []string
		code     int
		stdout   []string // substrings
		stderr   string
		describe string
	}{
		{[]string{"image", "import", "deb", v1, "--data-dir", data}, 0, []string{"imported deb:latest", "rootfs-tar"}, "", "import, flags after"},
		{[]string{"image", "import", "--data-dir", data, "deb", v2}, 1, nil, "ALREADY_EXISTS", "import existing"},
		{[]string{"image", "import", "--data-dir", data, "--replace", "deb", v2}, 0, []string{"imported deb:latest"}, "", "replace"},
		{[]string{"image", "import", "--data-dir", data, "--max-bytes", "2B", "small", v2}, 1, nil, "PAYLOAD_TOO_LARGE", "max bytes"},
		{[]string{"image", "import", "--data-dir", data, "host", v1}, 1, nil, "reserved", "host reserved"},
		{[]string{"image", "import", "--data-dir", data, "only-name"}, 1, nil, "usage: astrabox image import NAME FILE", "missing file"},
		{[]string{"image", "pull", host + "/tools/rnd:v3", "--data-dir", data}, 0, []string{"pulled rnd:v3", "registry", "1 layers"}, "", "pull"},
		{[]string{"image", "pull", "--data-dir", data, "--name", "other", host + "/tools/rnd:v3"}, 0, []string{"pulled other:latest"}, "", "pull with name"},
		{[]string{"image", "ls", "--data-dir", data}, 0, []string{"NAME", "host", "built-in", "deb:latest", "other:latest", "rnd:v3"}, "", "ls"},
		{[]string{"image", "rm", "--data-dir", data, "other"}, 0, []string{"removed other"}, "", "rm"},
		{[]string{"image", "rm", "--data-dir", data, "other"}, 1, nil, "IMAGE_NOT_FOUND", "rm again"},
		{[]string{"image", "prune", "--data-dir", data}, 0, []string{"deleted 1 old image versions"}, "", "prune"},
		{[]string{"image", "frobnicate"}, 2, nil, "unknown command", "unknown (a usage error)"},
		{[]string{"image"}, 0, []string{"usage: astrabox image"}, "", "help"},
	}
	for _, tt := range tests {
		code, stdout, stderr := run(t, tt.args...)
		if code != tt.code {
			t.Errorf("%s: exit %d, want %d; stderr %s", tt.describe, code, tt.code, stderr)
		}
		for _, want := range tt.stdout {
			if !strings.Contains(stdout, want) {
				t.Errorf("%s: stdout %q lacks %q", tt.describe, stdout, want)
			}
		}
		if tt.stderr != "" && !strings.Contains(stderr, tt.stderr) {
			t.Errorf("%s: stderr %q lacks %q", tt.describe, stderr, tt.stderr)
		}
	}

	code, stdout, _ := run(t, "image", "ls", "--json", "--data-dir", data)
	var infos []image.Info
	if err := json.Unmarshal([]byte(stdout), &infos); code != 0 || err != nil {
		t.Fatalf("ls --json: exit %d, %v: %s", code, err, stdout)
	}
	var names []string
	for _, in := range infos {
		names = append(names, in.Name)
	}
	if strings.Join(names, ",") != "host,deb:latest,rnd:v3" || !infos[0].BuiltIn {
		t.Errorf("ls --json names %v", names)
	}
	// The replaced image holds the second tarball, under DATA_DIR/images.
	b, err := os.ReadFile(filepath.Join(data, "images", "deb+latest", "rootfs", "etc", "motd"))
	if err != nil || string(b) != "two" {
		t.Errorf("deb:latest motd = %q, %v", b, err)
	}
}
