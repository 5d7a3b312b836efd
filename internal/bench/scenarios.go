package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
)

var scenarios = []scenario{
	{"create", "create → Running, cold and from a warm pool; create → first exec", benchCreate},
	{"exec", "exec round trip of `true`: Go SDK through the server's proxy, and execd reached directly", benchExecTrue},
	{"shipyard", "shell and python exec round trips through the Shipyard (Bay) facade against the OpenSandbox API", benchShipyard},
	{"stream", "streamed stdout of one command, and upload and download of one file, through the proxy", benchThroughput},
	{"reattach", "drop a log stream mid-command and resume it by offset: time to resume, bytes lost", benchReattach},
	{"concurrent", "sandboxes created at once", benchConcurrent},
	{"memory", "host memory per idle sandbox", benchMemory},
	{"density", "idle sandboxes held before a create fails or its latency doubles", benchDensity},
	{"cycles", "create/delete cycles: delete latency and what is left on the host", benchCycles},
}

func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// create makes a sandbox of target t through the API.
func (s *suite) create(ctx context.Context, t Target) (*wire.Sandbox, error) {
	return s.createWith(ctx, profileOf(t))
}

// createWith makes a sandbox of profile through the API, tagged as the
// suite's.
func (s *suite) createWith(ctx context.Context, profile string) (*wire.Sandbox, error) {
	sb, err := s.c.Create(ctx, wire.CreateSandboxRequest{Extensions: map[string]string{"profile": profile},
		Metadata: map[string]string{tagKey: s.tag}}, client.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	return sb, nil
}

// runTrueIn runs `true` in the sandbox's execd.
func runTrueIn(ctx context.Context, x *execdclient.Client) error {
	ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: "true"})
	if err != nil {
		return fmt.Errorf("exec: %w", err)
	}
	if ex.ExitCode != 0 {
		return fmt.Errorf("exec: exit code %d", ex.ExitCode)
	}
	return nil
}

func latencyResult(name, note string, ds []time.Duration) Result {
	l := summarize(ds)
	return Result{Scenario: name, Unit: "ms", Value: l.P50, Latency: &l, Note: note}
}

// timeCreate creates a sandbox of profile, runs `true` in it and deletes
// it, returning the time to Running and to the end of the first exec.
func (s *suite) timeCreate(ctx context.Context, profile string) (running, firstExec time.Duration, err error) {
	start := time.Now()
	sb, err := s.createWith(ctx, profile)
	if err != nil {
		return 0, 0, err
	}
	running = time.Since(start)
	x, err := s.c.Execd(ctx, sb.ID)
	if err != nil {
		return 0, 0, err
	}
	if err := runTrueIn(ctx, x); err != nil {
		return 0, 0, err
	}
	firstExec = time.Since(start)
	return running, firstExec, s.c.Delete(ctx, sb.ID)
}

// openBox creates a sandbox of t and connects to its execd through the
// server's proxy.
func (s *suite) openBox(ctx context.Context, t Target) (*wire.Sandbox, *execdclient.Client, error) {
	sb, err := s.create(ctx, t)
	if err != nil {
		return nil, nil, err
	}
	x, err := s.c.Execd(ctx, sb.ID)
	if err != nil {
		return nil, nil, err
	}
	return sb, x, nil
}

func benchCreate(ctx context.Context, s *suite, t Target) ([]Result, error) {
	var running, firstExec []time.Duration
	for range s.cfg.N {
		r, f, err := s.timeCreate(ctx, profileOf(t))
		if err != nil {
			return nil, err
		}
		running, firstExec = append(running, r), append(firstExec, f)
	}
	pooled, pooledExec, err := s.pooledCreates(ctx, t)
	if err != nil {
		return nil, err
	}
	var refs []Result
	if t.Name == s.cfg.Targets[0].Name {
		if u, err := unshareTrue(ctx, s.cfg.N); err == nil {
			r := latencyResult(" → first exec, cold", "the same namespaces by unshare(1), running true: no server, no execd", u)
			r.Backend = "unshare"
			refs = append(refs, r)
		}
	}
	return append(refs,
		latencyResult(" → Running, cold", "", running),
		latencyResult(" → first exec, cold", "", firstExec),
		latencyResult(" → Running, warm pool", fmt.Sprintf("pool of %d, refilled between samples", warmPoolSize), pooled),
		latencyResult(" → first exec, warm pool", "", pooledExec),
	), nil
}

// unshareTrue times `unshare -Urpmnui --fork true` (new user, PID, mount,
// network, UTS and IPC namespaces) n times: what a box's namespaces cost
// with nothing else.
func unshareTrue(ctx context.Context, n int) ([]time.Duration, error) {
	var out []time.Duration
	for range n {
		start := time.Now()
		if err := exec.CommandContext(ctx, "unshare", "-Urpmnui", "--fork", "true").Run(); err != nil {
			return nil, fmt.Errorf("unshare: %w", err)
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// pooledCreates gives t a stored profile with a warm pool, lets the
// server's reconciler fill it (the in-process server's is started here),
// and times N creates (and their first exec), each once the pool is full
// again. The pool is retired afterwards.
func (s *suite) pooledCreates(ctx context.Context, t Target) (running, firstExec []time.Duration, err error) {
	name := "pool-" + t.Name
	if err := s.c.PutProfile(ctx, name, profileBody(t, warmPoolSize)); err != nil {
		return nil, nil, err
	}
	defer func() {
		_ = s.c.PutProfile(context.WithoutCancel(ctx), name, profileBody(t, 0))
		if s.svc != nil {
			s.svc.ReconcileBackend(context.WithoutCancel(ctx), t.Name, t.Provider) // retires the pool
		}
	}()
	if s.svc != nil {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); s.svc.Reconcile(rctx, time.Hour) }()
		defer func() { stop(); <-done }()
	}
	for range s.cfg.N {
		if err := s.waitPoolFull(ctx, name, warmPoolSize); err != nil {
			return nil, nil, err
		}
		r, f, err := s.timeCreate(ctx, name)
		if err != nil {
			return nil, nil, fmt.Errorf("create from the pool: %w", err)
		}
		running, firstExec = append(running, r), append(firstExec, f)
	}
	return running, firstExec, nil
}

func benchExecTrue(ctx context.Context, s *suite, t Target) ([]Result, error) {
	sb, viaProxy, err := s.openBox(ctx, t)
	if err != nil {
		return nil, err
	}
	var direct *execdclient.Client // the backend's own connection, in-process only
	if t.Provider != nil {
		info, err := t.Provider.Inspect(ctx, sb.ID)
		if err != nil {
			return nil, err
		}
		direct = connect(t.Provider, info)
	}
	var proxied, straight []time.Duration
	for i := range s.cfg.N + 1 {
		start := time.Now()
		if err := runTrueIn(ctx, viaProxy); err != nil {
			return nil, err
		}
		if i > 0 { // the first warms connections up
			proxied = append(proxied, time.Since(start))
		}
		if direct == nil {
			continue
		}
		start = time.Now()
		if err := runTrueIn(ctx, direct); err != nil {
			return nil, err
		}
		if i > 0 {
			straight = append(straight, time.Since(start))
		}
	}
	out := []Result{latencyResult(" via the server proxy (Go SDK)", "", proxied)}
	if direct != nil {
		out = append(out, latencyResult(" to execd directly", "the backend's own connection", straight))
	}
	return out, nil
}

func benchThroughput(ctx context.Context, s *suite, t Target) ([]Result, error) {
	_, x, err := s.openBox(ctx, t)
	if err != nil {
		return nil, err
	}
	size := s.cfg.Size
	var got int64
	start := time.Now()
	err = x.RunStream(ctx, execdwire.RunCommandRequest{Command: fmt.Sprintf(streamCommand, size)}, func(ev execdclient.Event) error {
		if ev.Type == execdwire.EventStdout {
			got += int64(len(ev.Text))
		}
		return nil
	})
	if err != nil || got != size {
		return nil, fmt.Errorf("stream: got %d of %d bytes: %v", got, size, err)
	}
	stream := mbps(size, time.Since(start))

	src := filepath.Join(s.cfg.Dir, "bench-src.bin")
	if err := writeRandomFile(src, size); err != nil {
		return nil, err
	}
	defer os.Remove(src)
	f, err := os.Open(src)
	if err != nil {
		return nil, err
	}
	start = time.Now()
	err = x.Upload(ctx, "bench.bin", f, execdclient.UploadOptions{Size: &size})
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("upload: %w", err)
	}
	up := mbps(size, time.Since(start))
	start = time.Now()
	rc, err := x.Download(ctx, "bench.bin", 0, -1)
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	n, err := io.Copy(io.Discard, rc)
	rc.Close()
	if err != nil || n != size {
		return nil, fmt.Errorf("download: %d of %d bytes: %v", n, size, err)
	}
	down := mbps(size, time.Since(start))
	note := fmt.Sprintf("%d MiB", size>>20)
	return []Result{
		{Scenario: " stdout", Unit: "MB/s", Value: stream, Note: note},
		{Scenario: " upload", Unit: "MB/s", Value: up, Note: note + ", fsynced in the box"},
		{Scenario: " download", Unit: "MB/s", Value: down, Note: note},
	}, nil
}

// reattachLines is the output of the re-attach scenario's command: every
// number once, so a gap or a repeat shows.
const reattachLines = 500000

func benchReattach(ctx context.Context, s *suite, t Target) ([]Result, error) {
	_, x, err := s.openBox(ctx, t)
	if err != nil {
		return nil, err
	}
	var want bytes.Buffer
	for i := 1; i <= reattachLines; i++ {
		want.WriteString(strconv.Itoa(i))
		want.WriteByte('\n')
	}
	var resume []time.Duration
	var lost int64
	for range min(s.cfg.N, 10) {
		ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: fmt.Sprintf("seq 1 %d", reattachLines), Background: true})
		if err != nil {
			return nil, err
		}
		var got bytes.Buffer
		offset := int64(0)
		dropped := errors.New("dropped")
		// Read about a third, then drop the connection.
		err = x.FollowLogs(ctx, ex.ID, 0, true, func(ev execdclient.Event) error {
			if ev.Type == execdwire.EventStdout {
				got.WriteString(ev.Text)
				if o, err := strconv.ParseInt(ev.ID, 10, 64); err == nil {
					offset = o
				}
				if got.Len() > want.Len()/3 {
					return dropped
				}
			}
			return nil
		})
		if !errors.Is(err, dropped) {
			return nil, fmt.Errorf("follow logs: %v", err)
		}
		got.Truncate(int(offset)) // keep exactly what the resume offset covers
		start := time.Now()
		first := true
		err = x.FollowLogs(ctx, ex.ID, offset, true, func(ev execdclient.Event) error {
			if ev.Type == execdwire.EventStdout {
				if first {
					resume = append(resume, time.Since(start))
					first = false
				}
				got.WriteString(ev.Text)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("resume logs: %w", err)
		}
		if !bytes.Equal(got.Bytes(), want.Bytes()) {
			lost += int64(want.Len() - got.Len())
			if lost == 0 {
				lost = -1 // same length, different bytes: still wrong
			}
		}
	}
	r := latencyResult(" time to resume", fmt.Sprintf("bytes lost: %d", lost), resume)
	if lost != 0 {
		return []Result{r}, fmt.Errorf("re-attach lost %d bytes", lost)
	}
	return []Result{r}, nil
}

func benchConcurrent(ctx context.Context, s *suite, t Target) ([]Result, error) {
	var out []Result
	for _, k := range s.cfg.Concurrency {
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			lat      []time.Duration
			failures int
			firstErr error
		)
		start := time.Now()
		for range k {
			wg.Go(func() {
				t0 := time.Now()
				_, err := s.create(ctx, t)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failures++
					firstErr = cmpErr(firstErr, err)
					return
				}
				lat = append(lat, time.Since(t0))
			})
		}
		wg.Wait()
		wall := time.Since(start)
		l := summarize(lat)
		note := fmt.Sprintf("failures: %d; value is the wall time", failures)
		if firstErr != nil {
			note += "; first error: " + firstErr.Error()
		}
		out = append(out, Result{Scenario: fmt.Sprintf(" %d at once", k), Unit: "ms", Value: ms(wall), Latency: &l, Note: note})
		s.removeAll(ctx)
	}
	return out, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// memAvailable returns the host's MemAvailable in bytes.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// settledMemAvailable drops the host's clean page cache (as root; a
// sandbox's memory is not cache) and waits a moment, so that two readings
// differ by what was allocated between them rather than by what the
// kernel happened to cache.
func settledMemAvailable() int64 {
	syscall.Sync()
	_ = os.WriteFile("/proc/sys/vm/drop_caches", []byte("3"), 0)
	time.Sleep(time.Second)
	return memAvailable()
}

func benchMemory(ctx context.Context, s *suite, t Target) ([]Result, error) {
	before := settledMemAvailable()
	for range s.cfg.IdleBoxes {
		if _, err := s.create(ctx, t); err != nil {
			return nil, err
		}
	}
	used := before - settledMemAvailable()
	per := float64(used) / float64(s.cfg.IdleBoxes) / (1 << 20)
	return []Result{{Scenario: " per idle sandbox", Unit: "MiB", Value: per,
		Note: fmt.Sprintf("drop of the host's MemAvailable (page cache dropped) with %d idle sandboxes", s.cfg.IdleBoxes)}}, nil
}

func benchDensity(ctx context.Context, s *suite, t Target) ([]Result, error) {
	deadline := time.Now().Add(3 * time.Minute)
	var lat []time.Duration
	reason := fmt.Sprintf("stopped at the bound of %d", s.cfg.DensityMax)
	for len(lat) < s.cfg.DensityMax {
		if time.Now().After(deadline) {
			reason = "stopped after 3 minutes"
			break
		}
		start := time.Now()
		if _, err := s.create(ctx, t); err != nil {
			reason = "a create failed: " + err.Error()
			break
		}
		lat = append(lat, time.Since(start))
		if n := len(lat); n >= 20 {
			base, recent := summarize(lat[:10]).P50, summarize(lat[n-10:]).P50
			if recent > 2*base {
				reason = fmt.Sprintf("create latency doubled (p50 %.1f → %.1f ms)", base, recent)
				break
			}
		}
	}
	l := summarize(lat)
	return []Result{{Scenario: " idle sandboxes", Unit: "boxes", Value: float64(len(lat)), Latency: &l, Note: reason}}, nil
}

// benchCycles creates and deletes s.cfg.Cycles sandboxes, one after the
// other, and reports the delete latency. With the backend in-process it
// also checks the host is clean: a row " leaks" counts what the host
// holds after the cycles beyond what it held after one warm-up cycle
// (which sets up what boxes share, such as the firewall): mounts,
// cgroups, processes, network links, AstraBox's firewall rules, files
// under the backend's data dir, and boxes the backend still lists.
func benchCycles(ctx context.Context, s *suite, t Target) ([]Result, error) {
	cycle := func(i int) (time.Duration, error) {
		sb, err := s.create(ctx, t)
		if err != nil {
			return 0, fmt.Errorf("cycle %d: %w", i, err)
		}
		start := time.Now()
		if err := s.c.Delete(ctx, sb.ID); err != nil {
			return 0, fmt.Errorf("cycle %d: %w", i, err)
		}
		return time.Since(start), nil
	}
	if _, err := cycle(-1); err != nil {
		return nil, err
	}
	before := snapshot(t.DataDir)
	var del []time.Duration
	for i := range s.cfg.Cycles {
		d, err := cycle(i)
		if err != nil {
			return nil, err
		}
		del = append(del, d)
	}
	if t.Provider == nil {
		list, err := s.c.List(ctx, client.ListOptions{Metadata: map[string]string{tagKey: s.tag}})
		if err != nil {
			return nil, err
		}
		note := fmt.Sprintf("%d cycles; left: %d sandboxes listed by the server", s.cfg.Cycles, list.Pagination.TotalItems)
		return []Result{latencyResult(" delete latency", note, del)}, nil
	}
	// Teardown that ends after Delete returns (a process being reaped) has
	// 10 s to finish.
	var after hostCounts
	var leaked string
	var n int
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		after = snapshot(t.DataDir)
		if leaked, n = after.leaks(before); n == 0 || time.Now().After(deadline) {
			break
		}
	}
	left, err := t.Provider.List(ctx)
	if err != nil {
		return nil, err
	}
	n += len(left)
	note := fmt.Sprintf("clean after %d cycles", s.cfg.Cycles)
	if n > 0 {
		// Counts are the host's: what other programs made meanwhile shows too.
		note = fmt.Sprintf("LEAK? after %d cycles: %d boxes listed; the host holds %s more (anything on the host counts)", s.cfg.Cycles, len(left), leaked)
	}
	return []Result{
		latencyResult(" delete latency", fmt.Sprintf("%d cycles; %s", s.cfg.Cycles, after.diff(before)), del),
		{Scenario: " leaks", Unit: "left", Value: float64(n), Note: note},
	}, nil
}
