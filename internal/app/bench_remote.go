package app

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/bench"
	"github.com/astrabox/astrabox/sandbox"
)

// Names of the two sides of `astrabox bench remote` in its table.
const (
	benchRemoteDirect = "remote-direct"
	benchRemoteVia    = "via-opensandbox"
)

// runBenchRemote is `astrabox bench remote`: the create and exec scenarios
// of the suite on a running lifecycle service (an `astrabox serve`, or an
// OpenSandbox server) used directly, the reference, and then through an
// in-process server whose opensandbox backend is that service, in one run
// and one table.
func runBenchRemote(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("bench remote", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	url := fs.String("url", "", "the remote lifecycle service, e.g. http://host:8080 (required)")
	apiKey := fs.String("api-key", "", "its API key (default $ASTRABOX_REMOTE_API_KEY)")
	backend := fs.String("backend", "native", "the remote's backend the boxes run on")
	image := fs.String("image", "host", "the image of the boxes")
	n := fs.Int("n", 20, "samples of each latency")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		return fmt.Errorf("bench remote: --url is required")
	}
	key := cmp.Or(*apiKey, env("ASTRABOX_REMOTE_API_KEY"))
	scratch, remove, err := benchScratch()
	if err != nil {
		return err
	}
	defer remove()
	res := sandbox.Resources{MemoryBytes: 1 << 30}
	base := bench.SuiteConfig{N: max(*n, 1), Concurrency: []int{1}, Size: 1 << 20, IdleBoxes: 1, DensityMax: 20, Cycles: 1,
		Scenarios: []string{"create", "exec"}, Dir: scratch, Progress: stdio.Stderr}

	direct := base
	direct.Server, direct.APIKey = *url, key
	direct.Targets = []bench.Target{{Name: *backend, Image: *image, Resources: res}}
	repDirect, err := bench.RunSuite(ctx, direct)
	if err != nil {
		return fmt.Errorf("bench remote: the remote used directly: %w", err)
	}

	remotes := map[string]backends.OpenSandboxConfig{benchRemoteVia: {URL: *url, APIKey: key, Backend: *backend,
		Owner: fmt.Sprintf("astrabox-bench-%d", os.Getpid())}}
	p, err := backends.Config{Remotes: remotes}.Open(benchRemoteVia, backends.Env{DataDir: scratch})
	if err != nil {
		return err
	}
	defer closeBackend(p)
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	h := p.Health(hctx)
	cancel()
	if h.Status != sandbox.Healthy {
		return fmt.Errorf("bench remote: %s: %s", h.Status, h.Reason)
	}
	via := base
	via.Dir = scratch + "/via"
	if err := os.Mkdir(via.Dir, 0o700); err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	via.Targets = []bench.Target{{Name: benchRemoteVia, Provider: p, Image: *image, Resources: res}}
	repVia, err := bench.RunSuite(ctx, via)

	rep := repDirect
	rep.Floor = benchRemoteDirect
	for i := range rep.Results {
		if rep.Results[i].Backend == *backend {
			rep.Results[i].Backend = benchRemoteDirect
		}
	}
	for _, r := range repVia.Results {
		if r.Backend == benchRemoteVia { // references (unshare) are in the first run's rows already
			rep.Results = append(rep.Results, r)
		}
	}
	if len(rep.Results) > 0 {
		rep.WriteTable(stdio.Stdout)
	}
	if err != nil {
		return fmt.Errorf("bench remote: through the opensandbox backend: %w", err)
	}
	if *jsonOut != "" {
		return rep.WriteJSON(*jsonOut)
	}
	return nil
}
