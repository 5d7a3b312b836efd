package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// Target is one backend the suite measures.
type Target struct {
	// Name is the backend's name in the server ("process", "native", ...).
	Name string
	// Provider is the backend, served in-process; nil when the suite
	// measures a running server (scenarios that need the backend itself,
	// such as exec straight to execd, are then left out).
	Provider sandbox.Provider
	// Image is the image its boxes run.
	Image string
	// Resources of its boxes (room for the transfer scenarios).
	Resources sandbox.Resources
	// Network is its boxes' network mode ("" is the backend's default).
	Network sandbox.NetworkMode
	// DataDir is where the backend keeps its files, which the leak
	// scenario counts ("": not counted).
	DataDir string
}

// SuiteConfig configures the benchmark suite (`astrabox bench`).
type SuiteConfig struct {
	// Targets are measured in order; the first is the floor the others
	// are compared with (the process harness: no isolation).
	Targets []Target
	// N is the number of samples of each latency.
	N int
	// Concurrency lists the sizes of the concurrent-create scenario.
	Concurrency []int
	// Size is the bytes streamed, uploaded and downloaded.
	Size int64
	// IdleBoxes is how many idle boxes the memory scenario holds.
	IdleBoxes int
	// DensityMax bounds the density scenario.
	DensityMax int
	// Cycles is the number of create/delete cycles of the leak scenario.
	Cycles int
	// Scenarios selects scenarios by name (empty: all; see Scenarios).
	Scenarios []string
	// Dir is a scratch directory for transferred files.
	Dir string
	// Progress receives one line per scenario and backend.
	Progress io.Writer
	// Server, when set, is the URL of a running AstraBox server to measure
	// (with APIKey) instead of serving Targets in-process. Its sandboxes
	// other than the suite's own are never touched.
	Server, APIKey string
}

// Result is one measured figure of one backend.
type Result struct {
	Scenario string   `json:"scenario"`
	Backend  string   `json:"backend"`
	Unit     string   `json:"unit"`
	Value    float64  `json:"value"`
	Latency  *Latency `json:"latency,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// SuiteReport is the outcome of a suite run.
type SuiteReport struct {
	Date    time.Time `json:"date"`
	Machine string    `json:"machine"`
	Floor   string    `json:"floor"`
	Results []Result  `json:"results"`
}

// scenario measures one thing on one target and returns its results.
type scenario struct {
	name  string
	about string
	run   func(ctx context.Context, s *suite, t Target) ([]Result, error)
}

// Scenarios lists the suite's scenarios, in the order they run.
func Scenarios() []string {
	var out []string
	for _, sc := range scenarios {
		out = append(out, sc.name)
	}
	return out
}

// suite is a running benchmark: the server (in-process, or a running
// one) and its client.
type suite struct {
	cfg SuiteConfig
	svc *lifecycle.Service // nil for a running server
	c   *client.Client
	tag string // metadata value marking the suite's sandboxes
	// base and key are the server's URL and API key (for the scenarios
	// that speak other APIs than the Go SDK's, see shipyard.go).
	base, key string
}

// tagKey is the metadata key of the suite's sandboxes.
const tagKey = "astrabox-bench"

// RunSuite serves cfg.Targets from an in-process `astrabox serve` (SQLite
// store, loopback HTTP), or reaches the running server cfg.Server, and
// measures every selected scenario on each target through the Go SDK, one
// target after another, so that all figures come from one run on one
// machine. On return, every sandbox the suite created is deleted.
func RunSuite(ctx context.Context, cfg SuiteConfig) (SuiteReport, error) {
	rep := SuiteReport{Date: time.Now(), Machine: machine()}
	if len(cfg.Targets) == 0 {
		return rep, errors.New("bench: no backend to measure")
	}
	rep.Floor = cfg.Targets[0].Name
	for _, name := range cfg.Scenarios {
		if !slices.Contains(Scenarios(), name) {
			return rep, fmt.Errorf("bench: unknown scenario %q (known: %s)", name, strings.Join(Scenarios(), ", "))
		}
	}
	s := &suite{cfg: cfg, tag: fmt.Sprintf("%d-%d", os.Getpid(), time.Now().UnixNano())}
	if cfg.Server != "" {
		s.c = client.New(strings.TrimSuffix(cfg.Server, "/"), cfg.APIKey)
		s.base, s.key = strings.TrimSuffix(cfg.Server, "/"), cfg.APIKey
		for _, t := range cfg.Targets {
			if err := s.c.PutProfile(ctx, profileOf(t), profileBody(t, 0)); err != nil {
				return rep, fmt.Errorf("bench: profile for %s: %w", t.Name, err)
			}
		}
	} else {
		stop, err := s.serve(ctx)
		if err != nil {
			return rep, err
		}
		defer stop()
	}
	defer s.removeAll(context.WithoutCancel(ctx))

	for _, sc := range scenarios {
		if len(cfg.Scenarios) > 0 && !slices.Contains(cfg.Scenarios, sc.name) {
			continue
		}
		for _, t := range cfg.Targets {
			fmt.Fprintf(cfg.Progress, "bench: %-12s %-8s %s\n", sc.name, t.Name, sc.about)
			start := time.Now()
			res, err := sc.run(ctx, s, t)
			if err != nil {
				return rep, fmt.Errorf("%s on %s: %w", sc.name, t.Name, err)
			}
			for i := range res {
				res[i].Scenario = sc.name + res[i].Scenario
				if res[i].Backend == "" { // a reference measured alongside keeps its own name
					res[i].Backend = t.Name
				}
			}
			rep.Results = append(rep.Results, res...)
			fmt.Fprintf(cfg.Progress, "bench: %-12s %-8s done in %s\n", sc.name, t.Name, time.Since(start).Round(time.Millisecond))
			s.removeAll(ctx) // every scenario starts with no box
		}
	}
	return rep, nil
}

// serve starts the in-process server of the targets (SQLite store,
// loopback HTTP), wired as `astrabox serve` wires it (internal/server), and
// points the suite's client at it; stop ends it. The server is not
// started: the reconciler runs only where a scenario starts it (see
// pooledCreates), so that no pass lands in the middle of a measurement.
func (s *suite) serve(ctx context.Context) (stop func(), err error) {
	st, err := sqlite.Open(ctx, s.cfg.Dir+"/bench.db")
	if err != nil {
		return nil, err
	}
	backends := map[string]sandbox.Provider{}
	profiles := map[string]lifecycle.Profile{}
	var names []string
	for _, t := range s.cfg.Targets {
		backends[t.Name] = t.Provider
		profiles[profileOf(t)] = lifecycle.Profile{Backend: t.Name, Image: t.Image, Resources: t.Resources, Network: t.Network}
		names = append(names, t.Name)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		st.Close()
		return nil, fmt.Errorf("bench: vault key: %w", err)
	}
	ring, err := vault.New(key)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("bench: vault: %w", err)
	}
	const apiKey = "bench-key"
	srv, err := server.New(server.Config{Store: st, Backends: backends, DefaultBackend: s.cfg.Targets[0].Name, Installed: names,
		Profiles: profiles, APIKeyHash: api.HashKey(apiKey), Vault: ring, Logger: discardLogger()})
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("bench: wire the server: %w", err)
	}
	s.svc = srv.Sandboxes
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		srv.Close()
		st.Close()
		return nil, err
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(l) }()
	s.c = client.New("http://"+l.Addr().String(), apiKey)
	s.base, s.key = "http://"+l.Addr().String(), apiKey
	return func() {
		s.removeAll(context.WithoutCancel(ctx))
		hs.Close()
		srv.Close()
		st.Close()
	}, nil
}

// profileBody is the stored profile of target t's boxes, with a warm pool
// of poolSize.
func profileBody(t Target, poolSize int) map[string]any {
	body := map[string]any{"backend": t.Name, "image": t.Image, "resources": t.Resources, "poolSize": poolSize}
	if t.Network != "" {
		body["network"] = t.Network
	}
	return body
}

// profileOf names the profile the suite creates target's boxes with.
func profileOf(t Target) string { return "bench-" + t.Name }

// removeAll deletes the suite's sandboxes (and no other).
func (s *suite) removeAll(ctx context.Context) {
	for range 1000 {
		list, err := s.c.List(ctx, client.ListOptions{PageSize: 100, Metadata: map[string]string{tagKey: s.tag}})
		if err != nil || len(list.Items) == 0 {
			return
		}
		var wg sync.WaitGroup
		for _, sb := range list.Items {
			wg.Go(func() { _ = s.c.Delete(ctx, sb.ID) })
		}
		wg.Wait()
	}
}

// machine describes the host: cores, memory and kernel.
func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
		}
	}
	kernel := "?"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return fmt.Sprintf("%d cores, %s, Linux %s, %s", runtime.NumCPU(), mem, kernel, runtime.Version())
}

// WriteTable prints the report as one Markdown table: a row per scenario
// and backend, the value against the floor's, and the latency spread.
func (r SuiteReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "\nastrabox bench (%s; %s; floor: %s)\n\n", r.Date.Format("2006-01-02 15:04 MST"), r.Machine, r.Floor)
	floor := map[string]float64{}
	for _, res := range r.Results {
		if res.Backend == r.Floor {
			floor[res.Scenario] = res.Value
		}
	}
	rows := [][]string{{"scenario", "backend", "value", "vs " + r.Floor, "p50", "p90", "p99", "min", "max", "notes"}}
	for _, res := range r.Results {
		ratio := "-"
		if f := floor[res.Scenario]; f > 0 && res.Backend != r.Floor {
			ratio = fmt.Sprintf("%.2fx", res.Value/f)
		}
		row := []string{res.Scenario, res.Backend, fmt.Sprintf("%.2f %s", res.Value, res.Unit), ratio, "", "", "", "", "", res.Note}
		if l := res.Latency; l != nil {
			for i, v := range []float64{l.P50, l.P90, l.P99, l.Min, l.Max} {
				row[4+i] = fmt.Sprintf("%.2f", v)
			}
		} else {
			for i := 4; i < 9; i++ {
				row[i] = "-"
			}
		}
		rows = append(rows, row)
	}
	writeMarkdown(w, rows)
}

// WriteJSON writes the report to path as indented JSON.
func (r SuiteReport) WriteJSON(path string) error {
	return writeJSON(path, r)
}

// writeMarkdown prints rows (the first is the header) as an aligned
// Markdown table.
func writeMarkdown(w io.Writer, rows [][]string) {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len([]rune(c)))
		}
	}
	for i, r := range rows {
		cells := make([]string, len(r))
		for j, c := range r {
			cells[j] = c + strings.Repeat(" ", widths[j]-len([]rune(c)))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			seps := make([]string, len(widths))
			for j, wd := range widths {
				seps[j] = strings.Repeat("-", wd)
			}
			fmt.Fprintf(w, "| %s |\n", strings.Join(seps, " | "))
		}
	}
}
