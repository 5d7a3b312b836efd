package trust

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestInstallTrustFiles: the CA alone, and a bundle of the first system
// roots found followed by the CA; without system roots, the CA alone in
// both; a file in the way of the bundle (a link) is replaced, not
// followed.
func TestInstallTrustFiles(t *testing.T) {
	ca := []byte("-----BEGIN CERTIFICATE-----\nCA\n-----END CERTIFICATE-----\n")
	for _, tt := range []struct {
		name   string
		system map[string]string // path under the root: content
		want   string            // of the bundle
	}{
		{"debian roots", map[string]string{"/etc/ssl/certs/ca-certificates.crt": "ROOTS\n", "/etc/ssl/cert.pem": "OTHER\n"}, "ROOTS\n" + string(ca)},
		{"roots without a final newline", map[string]string{"/etc/pki/tls/certs/ca-bundle.crt": "ROOTS"}, "ROOTS\n" + string(ca)},
		{"no roots", nil, string(ca)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for p, c := range tt.system {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			outside := filepath.Join(t.TempDir(), "outside")
			if err := os.MkdirAll(filepath.Join(root, Dir), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(outside, filepath.Join(root, BundlePath)); err != nil {
				t.Fatal(err)
			}
			if err := install(context.Background(), localFiles{root: root}, ca); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(filepath.Join(root, CAPath)); !bytes.Equal(got, ca) {
				t.Errorf("%s: %q", CAPath, got)
			}
			if got, _ := os.ReadFile(filepath.Join(root, BundlePath)); string(got) != tt.want {
				t.Errorf("%s: %q, want %q", BundlePath, got, tt.want)
			}
			if fi, err := os.Lstat(filepath.Join(root, BundlePath)); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o644 {
				t.Errorf("%s is %v (%v), want a regular file of mode 0644", BundlePath, fi.Mode(), err)
			}
			if _, err := os.Stat(outside); err == nil {
				t.Error("the bundle was written through the link")
			}
		})
	}
}
