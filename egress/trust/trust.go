// Package trust is the server's egress CA and the trust bundle written
// into boxes. The CA signs the certificates the egress proxy presents when
// it terminates a box's TLS (protected delivery of the platform's vault
// secrets, the credential proxy's https bindings); its key never leaves
// the server. A box that must trust it gets, through its execd (Install)
// or from its own init (Write), the CA alone and a bundle of the box's own
// roots followed by the CA, under Dir; Env names the variables that point
// the box's TLS clients at them. Nothing else trusts the CA. Its users:
// platform/runner for Sessions that get vault secrets, package lifecycle
// for sandboxes created with credentialProxy, the native backend's init.
package trust

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
)

// Where the trust bundle goes in a box (a tmpfs on the native backend and
// a writable directory in most images).
const (
	Dir        = "/run/astrabox"
	BundlePath = Dir + "/ca-bundle.pem" // the box's own roots and the egress CA
	CAPath     = Dir + "/egress-ca.pem" // the egress CA alone (Node adds it to its own roots)
)

// env are the variables that point TLS clients in the box at the
// bundle: OpenSSL and Go (SSL_CERT_FILE), Python requests, curl, Node.
var env = map[string]string{
	"SSL_CERT_FILE":       BundlePath,
	"REQUESTS_CA_BUNDLE":  BundlePath,
	"CURL_CA_BUNDLE":      BundlePath,
	"NODE_EXTRA_CA_CERTS": CAPath,
}

// Env returns the environment variables that make a box's TLS clients
// use the bundle Install writes (a new map each call).
func Env() map[string]string { return maps.Clone(env) }

// systemBundles are where images keep their TLS roots; the first that
// exists starts the bundle.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",                // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",                  // Fedora, RHEL
	"/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem", // RHEL 7+
	"/etc/ssl/ca-bundle.pem",                            // openSUSE
	"/etc/ssl/cert.pem",                                 // Alpine, others
}

// maxSystemBundle bounds the roots read from a box.
const maxSystemBundle = 8 << 20

// Install writes caPEM into the box behind ex twice: alone (CAPath) and
// after the box's own roots, the first of the usual system bundles it has
// (BundlePath). A box without system roots gets a bundle of the CA alone.
func Install(ctx context.Context, ex *execdclient.Client, caPEM []byte) error {
	return install(ctx, execdFiles{ex}, caPEM)
}

// Write is Install in this process's own file system: what a box's init
// does, inside the box, before it starts the entrypoint, so that the
// entrypoint's first TLS call already trusts the proxy.
func Write(caPEM []byte) error {
	return install(context.Background(), localFiles{root: "/"}, caPEM)
}

// files are the file operations install needs.
type files interface {
	// read returns the file at path, refusing one over limit bytes.
	read(ctx context.Context, path string, limit int64) ([]byte, error)
	mkdir(ctx context.Context, dir string) error
	write(ctx context.Context, path string, data []byte) error
}

func install(ctx context.Context, fs files, caPEM []byte) error {
	var bundle bytes.Buffer
	for _, p := range systemBundles {
		b, err := fs.read(ctx, p, maxSystemBundle)
		if err != nil {
			continue
		}
		bundle.Write(b)
		if len(b) > 0 && b[len(b)-1] != '\n' {
			bundle.WriteByte('\n')
		}
		break
	}
	bundle.Write(caPEM)
	if err := fs.mkdir(ctx, Dir); err != nil {
		return fmt.Errorf("create %s: %w", Dir, err)
	}
	if err := fs.write(ctx, CAPath, caPEM); err != nil {
		return fmt.Errorf("write %s: %w", CAPath, err)
	}
	if err := fs.write(ctx, BundlePath, bundle.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", BundlePath, err)
	}
	return nil
}

// execdFiles are a box's files through its execd.
type execdFiles struct{ ex *execdclient.Client }

func (f execdFiles) read(ctx context.Context, path string, limit int64) ([]byte, error) {
	body, err := f.ex.Download(ctx, path, 0, 0)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	return readLimited(body, path, limit)
}

func (f execdFiles) mkdir(ctx context.Context, dir string) error {
	return f.ex.MakeDirs(ctx, map[string]wire.Permission{dir: {Mode: 755}})
}

func (f execdFiles) write(ctx context.Context, path string, data []byte) error {
	return f.ex.WriteFile(ctx, path, data, 644)
}

// localFiles are this process's files under root.
type localFiles struct{ root string }

func (l localFiles) read(_ context.Context, path string, limit int64) ([]byte, error) {
	f, err := os.Open(filepath.Join(l.root, path))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path, limit)
}

func (l localFiles) mkdir(_ context.Context, dir string) error {
	return os.MkdirAll(filepath.Join(l.root, dir), 0o755)
}

// write replaces path with a file of data, readable by every user of
// the box (a file of that name is replaced, not followed if a link).
func (l localFiles) write(_ context.Context, path string, data []byte) error {
	path = filepath.Join(l.root, path)
	tmp := path + ".tmp"
	_ = os.Remove(tmp) // a file or link of that name: never followed (O_EXCL)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644) // past the umask
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// readLimited reads r, the file at path, refusing more than limit bytes.
func readLimited(r io.Reader, path string, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s exceeds %d bytes", path, limit)
	}
	return b, nil
}
