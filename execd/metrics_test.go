package execd

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
)

// fakeRoot writes files (path relative to the root: content) under a
// temporary directory standing for "/".
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

const (
	testMeminfo = "MemTotal:       16384000 kB\nMemFree:  1000 kB\nMemAvailable:   12288000 kB\n"
	testStat    = "cpu  100 0 100 700 100 0 0 0 0 0\ncpu0 1 2 3 4\n"
)

func TestMetricsSources(t *testing.T) {
	tests := []struct {
		name     string
		files    map[string]string
		numCPU   int
		cpus     float64
		totalMiB float64
		usedMiB  float64
	}{
		{
			name:   "host only",
			files:  map[string]string{"proc/meminfo": testMeminfo, "proc/stat": testStat},
			numCPU: 8, cpus: 8, totalMiB: 16000, usedMiB: 4000,
		},
		{
			name: "old kernel without MemAvailable",
			files: map[string]string{"proc/meminfo": "MemTotal: 2048000 kB\nMemFree: 1024000 kB\nBuffers: 0 kB\nCached: 512000 kB\n",
				"proc/stat": testStat},
			numCPU: 2, cpus: 2, totalMiB: 2000, usedMiB: 500,
		},
		{
			name: "cgroup v2 limits in a namespace",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat, "proc/self/cgroup": "0::/\n",
				"sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
				"sys/fs/cgroup/memory.max":         "1073741824\n",
				"sys/fs/cgroup/memory.current":     "314572800\n",
				"sys/fs/cgroup/memory.stat":        "anon 1\ninactive_file 104857600\n",
				"sys/fs/cgroup/cpu.max":            "150000 100000\n",
				"sys/fs/cgroup/cpu.stat":           "usage_usec 5000000\n",
			},
			numCPU: 8, cpus: 1.5, totalMiB: 1024, usedMiB: 200,
		},
		{
			name: "cgroup v2 own directory without limits",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat, "proc/self/cgroup": "0::/box/a\n",
				"sys/fs/cgroup/cgroup.controllers": "cpu memory\n",
				"sys/fs/cgroup/box/a/memory.max":   "max\n",
				"sys/fs/cgroup/box/a/cpu.max":      "max 100000\n",
			},
			numCPU: 4, cpus: 4, totalMiB: 16000, usedMiB: 4000,
		},
		{
			name: "cgroup v2 own directory with limits",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat, "proc/self/cgroup": "0::/box/a\n",
				"sys/fs/cgroup/cgroup.controllers":   "cpu memory\n",
				"sys/fs/cgroup/memory.max":           "max\n",
				"sys/fs/cgroup/box/a/memory.max":     "536870912\n",
				"sys/fs/cgroup/box/a/memory.current": "104857600\n",
				"sys/fs/cgroup/box/a/cpu.max":        "50000 100000\n",
				"sys/fs/cgroup/box/a/cpu.stat":       "usage_usec 1\n",
			},
			numCPU: 4, cpus: 0.5, totalMiB: 512, usedMiB: 100,
		},
		{
			name: "cgroup v1 limits",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat,
				"proc/self/cgroup": "4:memory:/docker/x\n3:cpu,cpuacct:/docker/x\n0::/\n",
				"sys/fs/cgroup/memory/docker/x/memory.limit_in_bytes":  "2147483648\n",
				"sys/fs/cgroup/memory/docker/x/memory.usage_in_bytes":  "1073741824\n",
				"sys/fs/cgroup/memory/docker/x/memory.stat":            "cache 1\ntotal_inactive_file 536870912\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_quota_us":  "200000\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n",
				"sys/fs/cgroup/cpu,cpuacct/docker/x/cpuacct.usage":     "1000000000\n",
			},
			numCPU: 8, cpus: 2, totalMiB: 2048, usedMiB: 512,
		},
		{
			name: "cgroup v1 unlimited",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat, "proc/self/cgroup": "4:memory:/\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
				"sys/fs/cgroup/memory/memory.usage_in_bytes": "1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_quota_us":         "-1\n",
				"sys/fs/cgroup/cpu/cpu.cfs_period_us":        "100000\n",
			},
			numCPU: 2, cpus: 2, totalMiB: 16000, usedMiB: 4000,
		},
		{
			name: "memory limit above the host's",
			files: map[string]string{
				"proc/meminfo": testMeminfo, "proc/stat": testStat, "proc/self/cgroup": "0::/\n",
				"sys/fs/cgroup/cgroup.controllers": "memory\n",
				"sys/fs/cgroup/memory.max":         "1099511627776\n",
			},
			numCPU: 1, cpus: 1, totalMiB: 16000, usedMiB: 4000,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMetricsSampler(fakeRoot(t, tt.files), tt.numCPU)
			got, err := m.read()
			if err != nil {
				t.Fatal(err)
			}
			if got.CPUCount != tt.cpus || !near(got.MemTotalMiB, tt.totalMiB) || !near(got.MemUsedMiB, tt.usedMiB) || got.Timestamp == 0 {
				t.Fatalf("got %+v, want cpus %v total %v used %v", got, tt.cpus, tt.totalMiB, tt.usedMiB)
			}
		})
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 0.01 }

func TestMetricsNoMemoryIsAnError(t *testing.T) {
	m := newMetricsSampler(fakeRoot(t, map[string]string{"proc/stat": testStat}), 1)
	if _, err := m.read(); err == nil {
		t.Fatal("want an error without /proc/meminfo")
	}
}

func TestMetricsCPUPercent(t *testing.T) {
	at := time.Unix(1000, 0)
	tests := []struct {
		name      string
		prev, cur cpuReading
		cpus      float64
		want      float64
	}{
		{"proc half busy", cpuReading{busy: 100, total: 1000}, cpuReading{busy: 150, total: 1100}, 4, 50},
		{"proc idle", cpuReading{busy: 100, total: 1000}, cpuReading{busy: 100, total: 1100}, 4, 0},
		{"proc no ticks", cpuReading{busy: 100, total: 1000}, cpuReading{busy: 100, total: 1000}, 4, 0},
		{"cgroup one of two cpus", cpuReading{cgroup: true, at: at, busy: 10}, cpuReading{cgroup: true, at: at.Add(2 * time.Second), busy: 12}, 2, 50},
		{"cgroup clamped", cpuReading{cgroup: true, at: at, busy: 10}, cpuReading{cgroup: true, at: at.Add(time.Second), busy: 13}, 2, 100},
		{"counter reset", cpuReading{busy: 500, total: 1000}, cpuReading{busy: 100, total: 1100}, 1, 0},
	}
	for _, tt := range tests {
		if got := cpuPercent(tt.prev, tt.cur, tt.cpus); !near(got, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestMetricsCPUFromDeltas(t *testing.T) {
	root := fakeRoot(t, map[string]string{"proc/meminfo": testMeminfo, "proc/stat": testStat})
	m := newMetricsSampler(root, 2)
	// Pretend the baseline was taken long enough ago.
	m.mu.Lock()
	m.prev.at = m.prev.at.Add(-time.Second)
	m.mu.Unlock()
	if err := os.WriteFile(filepath.Join(root, "proc/stat"), []byte("cpu  175 0 100 725 100 0 0 0 0 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := m.read()
	if err != nil || !near(got.CPUUsedPct, 75) {
		t.Fatalf("got %+v %v, want 75%%", got, err)
	}
	// A reading right after keeps the last percentage.
	if got, _ := m.read(); !near(got.CPUUsedPct, 75) {
		t.Fatalf("immediate re-read: %v", got.CPUUsedPct)
	}
}

func TestMetricsHTTP(t *testing.T) {
	srv, c := startSessionServer(t, Config{})
	ctx := sessionCtx(t)
	m, err := c.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.CPUCount <= 0 || m.MemTotalMiB <= m.MemUsedMiB || m.MemUsedMiB <= 0 || m.CPUUsedPct < 0 || m.CPUUsedPct > 100 {
		t.Fatalf("implausible metrics %+v", m)
	}
	srv.metrics.interval.Store(int64(10 * time.Millisecond))
	var got []wire.Metrics
	errEnough := errors.New("enough")
	err = c.WatchMetrics(ctx, func(m wire.Metrics) error {
		got = append(got, m)
		if len(got) == 3 {
			return errEnough
		}
		return nil
	})
	if !errors.Is(err, errEnough) || got[2].Timestamp < got[0].Timestamp {
		t.Fatalf("watch: %v, %+v", err, got)
	}
	// Close ends a watch.
	done := make(chan error, 1)
	go func() { done <- c.WatchMetrics(ctx, func(wire.Metrics) error { return nil }) }()
	srv.Close()
	if err := <-done; err != nil {
		t.Fatalf("watch after Close: %v", err)
	}
}
