package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
)

// NativeConfig configures the native backend benchmark.
type NativeConfig struct {
	// Command is the argv prefix that runs the astrabox binary.
	Command []string
	// Dir is a scratch directory.
	Dir string
	// N is the number of samples of each latency.
	N int
	// Concurrent is the number of boxes created at once.
	Concurrent int
	// Cycles is the number of create/delete cycles of the leak check.
	Cycles int
	// Progress receives one line per scenario.
	Progress io.Writer
}

// RunNative measures the native backend against the process harness (the
// floor: execd with no isolation) and against `unshare` of the same
// namespaces running the same command.
func RunNative(ctx context.Context, cfg NativeConfig) (Report, error) {
	rep := Report{Title: "native backend against the process harness and unshare", Date: time.Now()}
	progress := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "bench: "+format+"\n", args...) }
	cgroupParent := fmt.Sprintf("astrabox-bench-%d", os.Getpid())
	nat, err := native.New(native.Config{DataDir: filepath.Join(cfg.Dir, "native"), Binary: cfg.Command[0], CgroupParent: cgroupParent})
	if err != nil {
		return rep, err
	}
	defer nat.Close()
	proc, err := process.New(process.Config{Dir: filepath.Join(cfg.Dir, "process"), Command: cfg.Command})
	if err != nil {
		return rep, err
	}
	spec := sandbox.Spec{Image: "host"}

	progress("create → first exec of `true`, %d times on each", cfg.N)
	natCreate, err := createToExec(ctx, nat, spec, cfg.N)
	if err != nil {
		return rep, err
	}
	procCreate, err := createToExec(ctx, proc, spec, cfg.N)
	if err != nil {
		return rep, err
	}
	unshareLat, err := unshareExec(ctx, cfg.N)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows,
		Row{Scenario: "create → first exec of `true` (p50), vs process harness", Unit: "ms", Subject: natCreate.P50, Alternative: procCreate.P50,
			AltName: "process harness", Latency: &natCreate, AltLatency: &procCreate},
		Row{Scenario: "create → first exec of `true` (p50), vs unshare", Unit: "ms", Subject: natCreate.P50, Alternative: unshareLat.P50,
			AltName: "unshare -Urpmnui --fork true", Latency: &natCreate, AltLatency: &unshareLat})

	progress("exec round trip of `true` in a running box, %d times on each", cfg.N)
	natExec, err := execRoundTrip(ctx, nat, spec, cfg.N)
	if err != nil {
		return rep, err
	}
	procExec, err := execRoundTrip(ctx, proc, spec, cfg.N)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, Row{Scenario: "exec round trip of `true` (p50)", Unit: "ms", Subject: natExec.P50, Alternative: procExec.P50,
		AltName: "process harness", Latency: &natExec, AltLatency: &procExec})

	progress("host memory per idle box (10 boxes)")
	mem, err := idleMemory(ctx, nat, spec, 10)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, Row{Scenario: "memory per idle box (cgroup: processes + file systems + kernel)", Unit: "MiB", Subject: mem, AltName: "-"})

	progress("%d boxes created at once", cfg.Concurrent)
	wall, failures, lat, err := concurrentCreates(ctx, nat, spec, cfg.Concurrent)
	if err != nil {
		return rep, err
	}
	pwall, pfailures, plat, err := concurrentCreates(ctx, proc, spec, cfg.Concurrent)
	if err != nil {
		return rep, err
	}
	rep.Rows = append(rep.Rows, Row{Scenario: fmt.Sprintf("%d concurrent creates: wall time (failures: %d vs %d)", cfg.Concurrent, failures, pfailures),
		Unit: "ms", Subject: wall, Alternative: pwall, AltName: "process harness", Latency: &lat, AltLatency: &plat})

	progress("%d create/delete cycles", cfg.Cycles)
	before := snapshotHost(cfg.Dir, cgroupParent)
	start := time.Now()
	for i := 0; i < cfg.Cycles; i++ {
		id := fmt.Sprintf("cycle-%d-%d", os.Getpid(), i)
		if _, err := nat.Create(ctx, id, spec); err != nil {
			return rep, fmt.Errorf("cycle %d: %w", i, err)
		}
		if err := nat.Delete(ctx, id); err != nil {
			return rep, fmt.Errorf("cycle %d: %w", i, err)
		}
	}
	perCycle := ms(time.Since(start)) / float64(max(cfg.Cycles, 1))
	leaks := snapshotHost(cfg.Dir, cgroupParent).diff(before)
	rep.Rows = append(rep.Rows, Row{Scenario: fmt.Sprintf("create+delete cycle, %d cycles; leaked: %s", cfg.Cycles, leaks), Unit: "ms", Subject: perCycle, AltName: "-"})
	return rep, nil
}

// connect returns a client of a box's execd, reached through p.
func connect(p sandbox.Provider, info sandbox.Info, opts ...client.Option) *client.Client {
	opts = append([]client.Option{client.WithToken(info.AccessToken), client.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return p.Dial(ctx, info.ID)
	})}, opts...)
	return client.New("http://execd", opts...)
}

var benchSeq atomic.Int64

func benchID() string { return fmt.Sprintf("bench-%d-%d", os.Getpid(), benchSeq.Add(1)) }

func runTrue(ctx context.Context, c *client.Client) error {
	ex, err := c.Run(ctx, wire.RunCommandRequest{Command: "true"})
	if err != nil {
		return err
	}
	if ex.ExitCode != 0 {
		return fmt.Errorf("true exited %d", ex.ExitCode)
	}
	return nil
}

func createToExec(ctx context.Context, p sandbox.Provider, spec sandbox.Spec, n int) (Latency, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		id := benchID()
		start := time.Now()
		info, err := p.Create(ctx, id, spec)
		if err != nil {
			return Latency{}, fmt.Errorf("%s create: %w", p.Name(), err)
		}
		err = runTrue(ctx, connect(p, info))
		ds = append(ds, time.Since(start))
		if derr := p.Delete(ctx, id); err == nil {
			err = derr
		}
		if err != nil {
			return Latency{}, fmt.Errorf("%s: %w", p.Name(), err)
		}
	}
	return summarize(ds), nil
}

func unshareExec(ctx context.Context, n int) (Latency, error) {
	var ds []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		out, err := exec.CommandContext(ctx, "unshare", "--user", "--map-root-user", "--pid", "--mount", "--net", "--uts", "--ipc", "--fork", "true").CombinedOutput()
		if err != nil {
			return Latency{}, fmt.Errorf("unshare: %v: %s", err, out)
		}
		ds = append(ds, time.Since(start))
	}
	return summarize(ds), nil
}

func execRoundTrip(ctx context.Context, p sandbox.Provider, spec sandbox.Spec, n int) (Latency, error) {
	id := benchID()
	info, err := p.Create(ctx, id, spec)
	if err != nil {
		return Latency{}, err
	}
	defer p.Delete(context.WithoutCancel(ctx), id)
	c := connect(p, info)
	if err := runTrue(ctx, c); err != nil { // warm the connection
		return Latency{}, err
	}
	var ds []time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if err := runTrue(ctx, c); err != nil {
			return Latency{}, err
		}
		ds = append(ds, time.Since(start))
	}
	return summarize(ds), nil
}

// idleMemory creates n boxes, lets them settle, and returns the mean memory
// charged to a box's cgroup in MiB.
func idleMemory(ctx context.Context, p *native.Provider, spec sandbox.Spec, n int) (float64, error) {
	var ids []string
	defer func() {
		for _, id := range ids {
			_ = p.Delete(context.WithoutCancel(ctx), id)
		}
	}()
	for i := 0; i < n; i++ {
		id := benchID()
		info, err := p.Create(ctx, id, spec)
		if err != nil {
			return 0, err
		}
		ids = append(ids, id)
		if err := runTrue(ctx, connect(p, info)); err != nil {
			return 0, err
		}
	}
	var total int64
	for _, id := range ids {
		b, err := p.MemoryUsage(id)
		if err != nil {
			return 0, err
		}
		total += b
	}
	return float64(total) / float64(n) / (1 << 20), nil
}

func concurrentCreates(ctx context.Context, p sandbox.Provider, spec sandbox.Spec, n int) (wall float64, failures int, lat Latency, err error) {
	var mu sync.Mutex
	var ds []time.Duration
	var ids []string
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := benchID()
			t0 := time.Now()
			info, err := p.Create(ctx, id, spec)
			if err == nil {
				err = runTrue(ctx, connect(p, info))
			}
			mu.Lock()
			defer mu.Unlock()
			ids = append(ids, id)
			if err != nil {
				failures++
				return
			}
			ds = append(ds, time.Since(t0))
		}()
	}
	wg.Wait()
	wall = ms(time.Since(start))
	for _, id := range ids {
		if derr := p.Delete(context.WithoutCancel(ctx), id); derr != nil && err == nil {
			err = derr
		}
	}
	return wall, failures, summarize(ds), err
}

// hostSnapshot counts what boxes could leak on the host: mounts under the
// benchmark's directory, cgroups under its cgroup parent, processes running
// as a box uid, and box directories and uid-range slots.
type hostSnapshot struct{ mounts, cgroups, procs, dirs int }

func snapshotHost(dir, cgroupParent string) hostSnapshot {
	var s hostSnapshot
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, dir) && !strings.Contains(line, filepath.Join(dir, "native", "bin")) {
				s.mounts++
			}
		}
	}
	for _, c := range []string{"pids", "memory", "cpu", "cpuacct", "freezer", ""} {
		entries, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", c, cgroupParent))
		for _, e := range entries {
			if e.IsDir() {
				s.cgroups++
			}
		}
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
				f := strings.Fields(rest)
				if len(f) > 0 {
					if uid, err := strconv.Atoi(f[0]); err == nil && uid >= 1<<20 {
						s.procs++
					}
				}
				break
			}
		}
	}
	for _, d := range []string{"boxes", "slots"} {
		entries, _ := os.ReadDir(filepath.Join(dir, "native", d))
		s.dirs += len(entries)
	}
	return s
}

func (s hostSnapshot) diff(before hostSnapshot) string {
	return fmt.Sprintf("%d mounts, %d cgroups, %d processes, %d dirs", s.mounts-before.mounts, s.cgroups-before.cgroups,
		s.procs-before.procs, s.dirs-before.dirs)
}
