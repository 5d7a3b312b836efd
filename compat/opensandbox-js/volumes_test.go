package sdk_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
	t.Run("native", func(t *testing.T) {
		srv, root := serve(t, "native")
		runSDKTest(ctx, t, pkgDir, "volumes.test.mjs", srv, "host", `{}`, "HOST_ROOT="+root)
	})
	t.Run("docker", func(t *testing.T) {
		img := dockerImage(ctx, t, binary)
		srv, root := serve(t, "native,docker")
		runSDKTest(ctx, t, pkgDir, "volumes.test.mjs", srv, img, `{"backend":"docker"}`, "HOST_ROOT="+root)
	})
}
