package sdk_test

import (
	"context"
	"os"
	"testing"

	"github.com/astrabox/astrabox/internal/testenv"
)

// TestOpenSandboxJSSDKEgress runs egress.test.mjs (the SDK's networkPolicy
// at create, getEgressPolicy, patchEgressRules, deleteEgressRules) on the
// native and the docker backends, network mode limited.
func TestOpenSandboxJSSDKEgress(t *testing.T) {
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

	t.Run("native", func(t *testing.T) {
		srv := startServer(ctx, t, binary)
		runSDKTest(ctx, t, pkgDir, "egress.test.mjs", srv, "host", `{}`)
	})
	t.Run("docker", func(t *testing.T) {
		img := dockerImage(ctx, t, binary)
		srv := startServer(ctx, t, binary, "--backends", "native,docker")
		runSDKTest(ctx, t, pkgDir, "egress.test.mjs", srv, img, `{"backend":"docker"}`)
	})
}
