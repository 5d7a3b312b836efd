package app

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/bench"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
)

func runBench(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) > 0 {
		switch args[0] {
		case "execd":
			return runBenchExecd(ctx, args[1:], stdio)
		case "platform":
			return runBenchPlatform(ctx, args[1:], stdio, env)
		case "replicas":
			return runBenchReplicas(ctx, args[1:], stdio, env)
		case "restart":
			return runBenchRestart(ctx, args[1:], stdio)
		case "remote":
			return runBenchRemote(ctx, args[1:], stdio, env)
		case "egress":
			return runBenchEgress(ctx, args[1:], stdio)
		case "auth":
			return runBenchAuth(ctx, args[1:], stdio)
		}
	}
	return runBenchSuite(ctx, args, stdio, env)
}

// runBenchAuth is `astrabox bench auth`: what authenticating a request
// costs with per-user keys (cache hit and miss) and browser sessions,
// beside the single API key of before.
func runBenchAuth(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench auth", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	n := fs.Int("n", 20000, "requests authenticated per scenario (a tenth of them for cache misses)")
	pg := fs.String("postgres", "", "also measure cache misses on this PostgreSQL database (a DSN)")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	return runBenchmark(stdio, "", *jsonOut, func(_, scratch string) (bench.Report, error) {
		return bench.RunAuth(ctx, bench.AuthConfig{N: max(*n, 100), Dir: scratch, PostgresDSN: *pg})
	})
}

// runBenchPlatform is `astrabox bench platform`: the agent platform's
// overheads (first token, followers, resume, log appends) on an
// in-process server with a fake model, each beside its reference.
func runBenchPlatform(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("bench platform", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	backends := fs.String("backends", "process", "sandbox backends, comma-separated: process (the test harness; AstraBox's own overhead) and native (needs root)")
	n := fs.Int("n", 20, "samples of each first-token and resume latency")
	followers := fs.Int("followers", 100, "clients following one Session at once")
	postgres := fs.String("postgres", "", "DSN of a PostgreSQL server for the append rows (default $ASTRABOX_TEST_POSTGRES; none: left out)")
	piRootfs := fs.String("pi-rootfs", "", "the pi image's rootfs tarball for pi's rows on native (default $ASTRABOX_TEST_PI_ROOTFS; make dist/pi-rootfs.tar.gz; none: left out)")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch, remove, err := benchScratch()
	if err != nil {
		return err
	}
	defer remove()
	rep, err := bench.RunPlatform(ctx, bench.PlatformConfig{Backends: strings.Split(*backends, ","), Binary: exe, Dir: scratch,
		N: max(*n, 1), Followers: max(*followers, 1), Postgres: cmp.Or(*postgres, env("ASTRABOX_TEST_POSTGRES")),
		PiRootfs: cmp.Or(*piRootfs, env("ASTRABOX_TEST_PI_ROOTFS")), Progress: stdio.Stderr})
	if len(rep.Rows) > 0 { // also after a failure: what was measured
		rep.WriteTable(stdio.Stdout)
	}
	if err != nil {
		return err
	}
	if *jsonOut != "" {
		return rep.WriteJSON(*jsonOut)
	}
	return nil
}

// runBenchReplicas is `astrabox bench replicas`: takeover and
// notification across two `astrabox serve` replicas on PostgreSQL.
func runBenchReplicas(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("bench replicas", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	postgres := fs.String("postgres", "", "DSN of the PostgreSQL server the replicas share (default $ASTRABOX_TEST_POSTGRES)")
	takeovers := fs.Int("takeovers", 5, "kill -9 takeovers measured")
	n := fs.Int("n", 20, "samples of each notification latency")
	lease := fs.Int("lease", 2, "the replicas' Session lease (and sweep interval) in seconds")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dsn := cmp.Or(*postgres, env("ASTRABOX_TEST_POSTGRES"))
	if dsn == "" {
		return fmt.Errorf("bench replicas: a PostgreSQL DSN is needed (--postgres or $ASTRABOX_TEST_POSTGRES)")
	}
	return runServeBench(stdio, *jsonOut, func(exe, scratch string) (bench.PlatformReport, error) {
		return bench.RunReplicas(ctx, bench.ReplicasConfig{Binary: exe, Dir: scratch, Postgres: dsn, Takeovers: max(*takeovers, 1),
			N: max(*n, 1), Lease: max(*lease, 1), Progress: stdio.Stderr})
	})
}

// runServeBench runs a bench of `astrabox serve` processes of this binary
// in a scratch directory, removed afterwards: it prints the table (also
// after a failure: what was measured) and writes it to jsonOut when set.
func runServeBench(stdio IO, jsonOut string, run func(exe, scratch string) (bench.PlatformReport, error)) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch, remove, err := benchScratch()
	if err != nil {
		return err
	}
	defer remove()
	rep, err := run(exe, scratch)
	if len(rep.Rows) > 0 {
		rep.WriteTable(stdio.Stdout)
	}
	if err != nil {
		return err
	}
	if jsonOut != "" {
		return rep.WriteJSON(jsonOut)
	}
	return nil
}

// runBenchRestart is `astrabox bench restart`: what a server's stop costs
// a reply in progress (kill -9 and a restart; a graceful stop with
// replies streaming).
func runBenchRestart(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench restart", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	kills := fs.Int("kills", 5, "kill -9 restarts measured")
	stops := fs.Int("stops", 3, "graceful stops measured for each number of replies streaming")
	streaming := fs.String("streaming", "0,1,50", "numbers of replies streaming at a graceful stop, comma-separated")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ns []int
	for _, f := range strings.Split(*streaming, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			return fmt.Errorf("bench restart: --streaming: %q is not a number of replies", f)
		}
		ns = append(ns, n)
	}
	return runServeBench(stdio, *jsonOut, func(exe, scratch string) (bench.PlatformReport, error) {
		return bench.RunRestart(ctx, bench.RestartConfig{Binary: exe, Dir: scratch, Kills: max(*kills, 1), Stops: max(*stops, 1),
			Streaming: ns, Progress: stdio.Stderr})
	})
}

// runBenchSuite is `astrabox bench`: every scenario on every named
// backend and on the process harness, in one run.
func runBenchSuite(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	fs.Usage = func() {
		fmt.Fprintf(stdio.Stderr, "usage: astrabox bench [flags]   (or: astrabox bench execd|platform|replicas|remote|egress [flags])\n\nscenarios: %s\n\n", strings.Join(bench.Scenarios(), ", "))
		fs.PrintDefaults()
	}
	backends := fs.String("backends", "native", "backends to measure, comma-separated (the process harness is always measured, as the floor)")
	n := fs.Int("n", 20, "samples of each latency")
	concurrency := fs.String("concurrency", "10,50,100", "sizes of the concurrent-create scenario, comma-separated")
	size := fs.String("size", "1GiB", "bytes streamed, uploaded and downloaded (suffixes KiB, MiB, GiB)")
	idle := fs.Int("idle", 100, "idle sandboxes of the memory scenario")
	densityMax := fs.Int("density-max", 500, "bound of the density scenario")
	cycles := fs.Int("cycles", 1000, "create/delete cycles of the leak scenario")
	only := fs.String("scenarios", "", "run only these scenarios, comma-separated")
	dockerImage := fs.String("docker-image", "", "image of the docker backend's sandboxes, present in the engine (e.g. debian:12)")
	kube := addKubeBenchFlags(fs)
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	server := fs.String("server", "", "measure this running server (URL) instead of serving the backends in-process")
	apiKey := fs.String("api-key", "", "API key of --server (default $ASTRABOX_API_KEY)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bytes, err := parseSize(*size)
	if err != nil {
		return err
	}
	var sizes []int
	for _, f := range strings.Split(*concurrency, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || k <= 0 {
			return fmt.Errorf("invalid --concurrency %q", *concurrency)
		}
		sizes = append(sizes, k)
	}
	var scenarios []string
	if *only != "" {
		scenarios = strings.Split(*only, ",")
	}
	res := sandbox.Resources{MemoryBytes: bytes + 1<<30, DiskBytes: bytes + 512<<20}
	cfg := bench.SuiteConfig{N: max(*n, 1), Concurrency: sizes, Size: bytes, IdleBoxes: max(*idle, 1),
		DensityMax: max(*densityMax, 20), Cycles: max(*cycles, 1), Scenarios: scenarios, Progress: stdio.Stderr}
	if *server != "" {
		// A running server: its backends as named, no process floor (the
		// first backend is the reference), no access to the backends.
		cfg.Server, cfg.APIKey = *server, cmp.Or(*apiKey, env("ASTRABOX_API_KEY"))
		for _, name := range strings.Split(*backends, ",") {
			name = strings.TrimSpace(name)
			image := "host"
			switch name {
			case "docker":
				image = *dockerImage
			case "kubernetes":
				image = *kube.image
			}
			cfg.Targets = append(cfg.Targets, bench.Target{Name: name, Image: image, Resources: res})
		}
		scratch, remove, err := benchScratch()
		if err != nil {
			return err
		}
		defer remove()
		cfg.Dir = scratch
		return writeSuite(ctx, stdio, cfg, *jsonOut)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch, remove, err := benchScratch()
	if err != nil {
		return err
	}
	defer remove()
	targets, closeAll, err := benchTargets(ctx, strings.Split(*backends, ","), exe, scratch, *dockerImage, kube, res)
	defer closeAll()
	if err != nil {
		return err
	}
	cfg.Targets, cfg.Dir = targets, scratch
	return writeSuite(ctx, stdio, cfg, *jsonOut)
}

// writeSuite runs the suite and prints its table (also after a failure,
// with what was measured), then writes its JSON when jsonOut is set.
func writeSuite(ctx context.Context, stdio IO, cfg bench.SuiteConfig, jsonOut string) error {
	rep, err := bench.RunSuite(ctx, cfg)
	if len(rep.Results) > 0 {
		rep.WriteTable(stdio.Stdout)
	}
	if err != nil {
		return err
	}
	if jsonOut != "" {
		return rep.WriteJSON(jsonOut)
	}
	return nil
}

// benchTargets builds the process harness and the named backends, each
// with its state under scratch; closeAll releases what they set up.
func benchTargets(ctx context.Context, names []string, exe, scratch, dockerImage string, kube kubeBenchFlags, res sandbox.Resources) ([]bench.Target, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	proc, err := process.New(process.Config{Dir: filepath.Join(scratch, "process"), Command: []string{exe}})
	if err != nil {
		return nil, closeAll, err
	}
	targets := []bench.Target{{Name: "process", Provider: proc, Resources: res}}
	for _, name := range names {
		switch strings.TrimSpace(name) {
		case "native":
			p, err := backends.Config{Native: backends.NativeConfig{CgroupParent: fmt.Sprintf("astrabox-bench-%d", os.Getpid())}}.
				Open("native", backends.Env{DataDir: scratch, Binary: exe})
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, func() { closeBackend(p) })
			targets = append(targets, bench.Target{Name: "native", Provider: p, Image: "host", Resources: res, DataDir: filepath.Join(scratch, "native")})
		case "docker":
			if dockerImage == "" {
				return nil, closeAll, fmt.Errorf("bench: the docker backend needs --docker-image (load one with: astrabox image import debian:12 ROOTFS.tar.gz --docker)")
			}
			// The docker backend refuses a disk limit it cannot hold on
			// the writable layer: the transfer scenarios' room comes from
			// its default sizes of /tmp and /workspace instead.
			p, err := backends.Config{}.Open("docker", backends.Env{DataDir: scratch, Binary: exe,
				DockerOverride: func(c *docker.Config) { c.Defaults = sandbox.Resources{DiskBytes: res.DiskBytes} }})
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, func() { closeBackend(p) })
			dres := res
			dres.DiskBytes = 0
			targets = append(targets, bench.Target{Name: "docker", Provider: p, Image: dockerImage, Resources: dres})
		case "kubernetes":
			ts, closeFn, err := kubeBenchTargets(kube, res)
			if err != nil {
				return nil, closeAll, err
			}
			closers = append(closers, closeFn)
			targets = append(targets, ts...)
		case "", "process":
		default:
			return nil, closeAll, fmt.Errorf("bench: unknown backend %q (known: native, docker, kubernetes)", name)
		}
	}
	return targets, closeAll, nil
}

// closeBackend closes a backend the bench opened, when it has a Close.
func closeBackend(p sandbox.Provider) {
	if c, ok := p.(io.Closer); ok {
		_ = c.Close()
	}
}

// runBenchExecd is `astrabox bench execd`: execd's own costs, in a box of
// the process harness, against the raw host.
func runBenchExecd(ctx context.Context, args []string, stdio IO) error {
	fs := flag.NewFlagSet("bench execd", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	n := fs.Int("n", 200, "exec round trips")
	size := fs.String("size", "1GiB", "bytes streamed and transferred (suffixes KiB, MiB, GiB)")
	repeat := fs.Int("repeat", 3, "repetitions of each transfer (the median is reported)")
	lines := fs.Int("lines", 3_000_000, "lines `seq` prints for the per-line framing row")
	dir := fs.String("dir", "", "scratch directory on the disk to measure (default: a new temporary directory)")
	jsonOut := fs.String("json", "", "also write the results to this JSON file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	bytes, err := parseSize(*size)
	if err != nil {
		return err
	}
	return runBenchmark(stdio, *dir, *jsonOut, func(exe, scratch string) (bench.Report, error) {
		return bench.RunExecd(ctx, bench.ExecdConfig{
			Command: []string{exe}, Dir: scratch, N: max(*n, 1), Size: bytes, Repeat: max(*repeat, 1), Lines: *lines, Progress: stdio.Stderr,
		})
	})
}

// runBenchmark runs one benchmark with the astrabox binary and a scratch
// directory (dir, or a new temporary one traversable by the unprivileged
// users boxes run as, removed afterwards), prints its table and writes its
// JSON when jsonOut is set.
func runBenchmark(stdio IO, dir, jsonOut string, run func(exe, scratch string) (bench.Report, error)) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate the astrabox binary: %w", err)
	}
	scratch := dir
	if scratch == "" {
		var remove func()
		if scratch, remove, err = benchScratch(); err != nil {
			return err
		}
		defer remove()
	}
	rep, err := run(exe, scratch)
	if err != nil {
		return err
	}
	rep.WriteTable(stdio.Stdout)
	if jsonOut != "" {
		return rep.WriteJSON(jsonOut)
	}
	return nil
}

// parseSize parses "123", "16KiB", "64MiB", "1GiB".
func parseSize(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"B", 1}}
	num, mult := s, int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			num, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseInt(strings.TrimSpace(num), 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("invalid size %q (want e.g. 64MiB)", s)
	}
	return v * mult, nil
}

// benchScratch makes a new temporary directory for a benchmark's state,
// traversable by the unprivileged users boxes run as; remove deletes it.
func benchScratch() (dir string, remove func(), err error) {
	dir, err = os.MkdirTemp("", "astrabox-bench-")
	if err != nil {
		return "", nil, fmt.Errorf("scratch dir: %w", err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("scratch dir: %w", err)
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}
