package sdk_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
)

// TestOpenSandboxJSSDKVolumes runs volumes.test.mjs: sandboxes with pvc
// and host volumes made by the SDK's Sandbox.create, on a server that
// allows one host path root, on the native backend and (with Docker and
// the test rootfs) the docker one.
func TestOpenSandboxJSSDKVolumes(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	defer cancel()
	installSDK(ctx, t, pkgDir)
	binary := testenv.AstraboxBinary(t)
	serve := func(t *testing.T, backends string) (*server, string) {
		root, err := os.MkdirTemp("", "astrabox-compat-hostpaths-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(root) })
		if root, err = filepath.EvalSymlinks(root); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(root, "shared"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "shared", "from-host"), []byte("host\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(t.TempDir(), "volumes.json")
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{"volumes": {"hostPathRoots": [%q]}}`, root)), 0o600); err != nil {
			t.Fatal(err)
		}
		return startServer(ctx, t, binary, "--config", cfg, "--backends", backends), root
	}
	run := func(t *testing.T, srv *server, root, image, extensions string) {
		cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", "volumes.test.mjs")
		cmd.Dir = pkgDir
		cmd.Env = append(os.Environ(), "OPEN_SANDBOX_DOMAIN="+srv.addr, "OPEN_SANDBOX_API_KEY="+srv.key,
			"SANDBOX_IMAGE="+image, "SANDBOX_EXTENSIONS="+extensions, "HOST_ROOT="+root, "NO_COLOR=1")
		out := newLineLogger(t, "sdk: ")
		cmd.Stdout, cmd.Stderr = out, out
		cmd.WaitDelay = 10 * time.Second
		err := cmd.Run()
		out.Flush()
		if err != nil {
			t.Fatalf("node --test volumes.test.mjs: %v (its output is above)", err)
		}
	}
	t.Run("native", func(t *testing.T) {
		srv, root := serve(t, "native")
		run(t, srv, root, "host", `{}`)
	})
	t.Run("docker", func(t *testing.T) {
		testenv.NeedDocker(t)
		rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
		testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
		const img = "astrabox-compat-debian:12"
		if out, err := exec.CommandContext(ctx, binary, "image", "import", img, rootfs, "--docker",
			"--data-dir", t.TempDir()).CombinedOutput(); err != nil {
			t.Fatalf("image import --docker: %v: %s", err, out)
		}
		srv, root := serve(t, "native,docker")
		run(t, srv, root, img, `{"backend":"docker"}`)
	})
}
