package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
)

// APIConfig configures the server benchmark.
type APIConfig struct {
	// Command is the argv prefix that runs the astrabox binary.
	Command []string
	// Dir is a scratch directory (traversable by unprivileged users).
	Dir string
	// N is the number of samples of each latency.
	N int
	// Concurrent is the number of sandboxes created at once.
	Concurrent int
	// Progress receives one line per scenario.
	Progress io.Writer
}

// RunAPI measures the server on the native backend through its HTTP API
// and the Go SDK, against calling the backend and execd directly (the cost
// of the API, the store and the proxy).
func RunAPI(ctx context.Context, cfg APIConfig) (Report, error) {
	rep := Report{Title: "the server's HTTP API (native backend) against the backend called directly", Date: time.Now()}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	st, err := sqlite.Open(ctx, filepath.Join(cfg.Dir, "astrabox.db"))
	if err != nil {
		return rep, err
	}
	defer st.Close()
	cgroupParent := fmt.Sprintf("astrabox-bench-api-%d", os.Getpid())
	nat, err := native.New(native.Config{DataDir: filepath.Join(cfg.Dir, "native"), Binary: cfg.Command[0], CgroupParent: cgroupParent})
	if err != nil {
		return rep, err
	}
	defer nat.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"native": nat}, DefaultBackend: "native",
		Profiles: map[string]lifecycle.Profile{"warm": {Name: "warm", PoolSize: warmPoolSize}}})
	if err != nil {
		return rep, err
	}
	const key = "bench-key"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	hs := &http.Server{Handler: api.New(api.Config{Service: svc, Store: st, APIKeyHash: api.HashKey(key)}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(l) }()
	defer hs.Close()
	c := client.New("http://"+l.Addr().String(), key)
	spec := sandbox.Spec{Image: "host"}

	progress("create → Running through the API, %d times; the backend's Create alone as the alternative", cfg.N)
	var viaAPI, direct []time.Duration
	for i := 0; i < cfg.N; i++ {
		start := time.Now()
		sb, err := c.Create(ctx, wire.CreateSandboxRequest{}, client.CreateOptions{})
		if err != nil {
			return rep, fmt.Errorf("create through the API: %w", err)
		}
		viaAPI = append(viaAPI, time.Since(start))
		if err := c.Delete(ctx, sb.ID); err != nil {
			return rep, err
		}
		id := benchID()
		start = time.Now()
		if _, err := nat.Create(ctx, id, spec); err != nil {
			return rep, err
		}
		direct = append(direct, time.Since(start))
		if err := nat.Delete(ctx, id); err != nil {
			return rep, err
		}
	}
	a, d := summarize(viaAPI), summarize(direct)
	rep.Rows = append(rep.Rows, Row{Scenario: "create → Running (p50), cold", Unit: "ms", Subject: a.P50, Alternative: d.P50,
		AltName: "native Create called directly", Latency: &a, AltLatency: &d})

	progress("create → Running through the API claimed from a warm pool of %d, %d times", warmPoolSize, cfg.N)
	pooled, err := measurePooledCreate(ctx, svc, c, cfg.N)
	if err != nil {
		return rep, err
	}
	pl := summarize(pooled)
	rep.Rows = append(rep.Rows, Row{Scenario: "create → Running (p50), from a warm pool", Unit: "ms", Subject: pl.P50, Alternative: a.P50,
		AltName: "a cold create through the API", Latency: &pl, AltLatency: &a})

	progress("exec round trip of `true` through the proxy, %d times; execd's socket directly as the alternative", cfg.N)
	sb, err := c.Create(ctx, wire.CreateSandboxRequest{}, client.CreateOptions{})
	if err != nil {
		return rep, err
	}
	defer c.Delete(context.WithoutCancel(ctx), sb.ID)
	x, err := c.Execd(ctx, sb.ID)
	if err != nil {
		return rep, err
	}
	info, err := nat.Inspect(ctx, sb.ID)
	if err != nil {
		return rep, err
	}
	xd := connect(nat, info)
	if err := runTrue(ctx, x); err != nil {
		return rep, err
	}
	if err := runTrue(ctx, xd); err != nil {
		return rep, err
	}
	var proxied, socket []time.Duration
	for i := 0; i < cfg.N; i++ {
		start := time.Now()
		if err := runTrue(ctx, x); err != nil {
			return rep, err
		}
		proxied = append(proxied, time.Since(start))
		start = time.Now()
		if err := runTrue(ctx, xd); err != nil {
			return rep, err
		}
		socket = append(socket, time.Since(start))
	}
	p, s := summarize(proxied), summarize(socket)
	rep.Rows = append(rep.Rows, Row{Scenario: "exec round trip of `true` through the proxy (p50)", Unit: "ms", Subject: p.P50, Alternative: s.P50,
		AltName: "execd's socket directly", Latency: &p, AltLatency: &s})

	progress("%d sandboxes created at once through the API", cfg.Concurrent)
	var mu sync.Mutex
	var ids []string
	var lat []time.Duration
	failures := 0
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < cfg.Concurrent; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			sb, err := c.Create(ctx, wire.CreateSandboxRequest{}, client.CreateOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failures++
				return
			}
			ids = append(ids, sb.ID)
			lat = append(lat, time.Since(t0))
		}()
	}
	wg.Wait()
	wall := ms(time.Since(start))
	var errs []error
	for _, id := range ids {
		if err := c.Delete(context.WithoutCancel(ctx), id); err != nil {
			errs = append(errs, err)
		}
	}
	cl := summarize(lat)
	rep.Rows = append(rep.Rows, Row{Scenario: fmt.Sprintf("%d concurrent creates through the API: wall time (failures: %d)", cfg.Concurrent, failures),
		Unit: "ms", Subject: wall, AltName: "-", Latency: &cl})
	return rep, errors.Join(errs...)
}

// warmPoolSize is the pool of the benchmark's "warm" profile.
const warmPoolSize = 4

// measurePooledCreate runs the service's reconciler (which fills the pool
// and refills it after each claim) and times n creates of profile "warm",
// each once the pool is full again. It drains the pool before returning.
func measurePooledCreate(ctx context.Context, svc *lifecycle.Service, c *client.Client, n int) ([]time.Duration, error) {
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); svc.Reconcile(rctx, time.Hour) }()
	defer func() {
		stop()
		<-done
		recs, _, _ := svc.Store().ListSandboxes(context.WithoutCancel(ctx), store.ListFilter{AllPools: true})
		for _, r := range recs {
			if r.Pool != "" {
				_ = svc.Delete(context.WithoutCancel(ctx), r.ID, "bench_done")
			}
		}
	}()
	var out []time.Duration
	for range n {
		if err := waitPoolFull(ctx, svc, warmPoolSize); err != nil {
			return nil, err
		}
		start := time.Now()
		sb, err := c.Create(ctx, wire.CreateSandboxRequest{Extensions: map[string]string{"profile": "warm"}}, client.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("create from the pool: %w", err)
		}
		out = append(out, time.Since(start))
		if err := c.Delete(ctx, sb.ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// waitPoolFull polls the store until size pooled boxes are Running.
func waitPoolFull(ctx context.Context, svc *lifecycle.Service, size int) error {
	deadline := time.Now().Add(time.Minute)
	for {
		recs, _, err := svc.Store().ListSandboxes(ctx, store.ListFilter{AllPools: true, States: []sandbox.State{sandbox.StateRunning}})
		if err != nil {
			return err
		}
		ready := 0
		for _, r := range recs {
			if r.Pool != "" {
				ready++
			}
		}
		if ready >= size {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool holds %d of %d boxes after a minute", ready, size)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
