package sdk_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/testenv"
)

// TestOpenSandboxJSSDKKubernetes runs the SDK test on the kubernetes
// backend, on the test cluster, through a profile with a warm pool: the
// SDK's sandbox is claimed from the pool (the metrics count the hit), and
// pause is refused as the backend cannot freeze a Pod.
func TestOpenSandboxJSSDKKubernetes(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	k := testenv.NeedKube(t)
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	defer cancel()
	installSDK(ctx, t, pkgDir)

	// The profile's box equals the SDK test's main sandbox (image,
	// entrypoint, env, resources), so that its create claims a pool box.
	profile := map[string]any{
		"backend": "kubernetes", "image": k.Image, "entrypoint": []string{"sleep", "infinity"},
		"env":       map[string]string{"GREETING": "hello from env"},
		"resources": map[string]any{"milliCpu": 500, "memoryBytes": 512 << 20},
		"poolSize":  1,
	}
	owner := "compat-" + randomHex(4)
	// Last: a pool box that was still being made when the server stopped
	// has lost its record with the server's data dir; it goes here.
	t.Cleanup(func() {
		if left := k.RemoveOwned(t, "default", owner); left != "" {
			t.Logf("removed what the server left in the cluster: %s", left)
		}
	})
	cfg := map[string]any{
		"kubernetes": map[string]any{"kubeconfig": k.Kubeconfig, "namespace": "default", "execdImage": k.ExecdImage,
			"pullPolicy": "Never", "owner": owner, "seccompProfile": k.Seccomp,
			// Requests of a tenth of the limits: the test's boxes and the
			// pool's refill fit on a 2-core node with others' tests.
			"requestPercent": 10},
		"replicas": map[string]any{"reconcileInterval": 1},
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(t.TempDir(), "kube.json")
	if err := os.WriteFile(cfgPath, body, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startServer(ctx, t, testenv.AstraboxBinary(t), "--config", cfgPath, "--backends", "kubernetes")
	c := client.New("http://"+srv.addr, srv.key)
	// A stored profile (one from the config file cannot be changed, and
	// the cleanup empties the pool by changing it).
	if err := c.PutProfile(ctx, "kwarm", profile); err != nil {
		t.Fatal(err)
	}
	// Empty the pool before the server stops (its boxes outlive it).
	t.Cleanup(func() {
		profile["poolSize"] = 0
		if err := c.PutProfile(context.Background(), "kwarm", profile); err != nil {
			t.Errorf("empty the pool: %v", err)
			return
		}
		waitPool(t, c, "ready", func(n int) bool { return n == 0 })
	})
	waitPool(t, c, "ready", func(n int) bool { return n >= 1 })

	runSDKTest(ctx, t, pkgDir, "sdk.test.mjs", srv, k.Image, `{"profile":"kwarm"}`, "SANDBOX_PAUSE=unsupported")
	if hits := poolMetric(t, c, "hit"); hits < 1 {
		t.Fatalf("no create claimed the warm pool (hits %d)", hits)
	}
}

var (
	poolReady = regexp.MustCompile(`(?m)^astrabox_pool_ready\{pool="kwarm/[^"]*"\} (\d+)$`)
	poolHit   = regexp.MustCompile(`(?m)^astrabox_pool_claims_total\{pool="kwarm/[^"]*",outcome="hit"\} (\d+)$`)
)

// poolMetric reads the kwarm pool's ready boxes ("ready") or its hits
// ("hit") from the server's metrics; absent is 0.
func poolMetric(t *testing.T, c *client.Client, which string) int {
	t.Helper()
	text, err := c.Metrics(context.Background())
	if err != nil {
		t.Fatalf("metrics: %v", err)
	}
	re := poolReady
	if which == "hit" {
		re = poolHit
	}
	n := 0
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// waitPool waits up to three minutes for the pool metric to satisfy ok.
func waitPool(t *testing.T, c *client.Client, which string, ok func(int) bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		n := poolMetric(t, c, which)
		if ok(n) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pool %s is %d after 3 minutes", which, n)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
