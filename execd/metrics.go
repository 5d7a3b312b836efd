package execd

import (
	"bufio"
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/sse"
	"github.com/astrabox/astrabox/sandbox"
)

// Metrics (GET /metrics, GET /metrics/watch).
//
// The box's own limits come first: with a cgroup memory limit (v2
// memory.max, v1 memory.limit_in_bytes) the total is the limit and the used
// memory the cgroup's usage less its inactive file cache; with a CPU quota
// (v2 cpu.max, v1 cpu.cfs_quota_us) the CPU count is quota/period and the
// usage the cgroup's CPU time over that allowance. Without limits, the
// host's /proc/meminfo, /proc/stat and runtime.NumCPU are used.
//
// cpu_used_pct (0-100, of all the CPUs counted) is computed from the
// difference between the current reading and the previous one, which the
// sampler keeps: GET /metrics never sleeps. Readings closer together than
// minSampleGap return the last computed percentage.

// minSampleGap is the shortest window a CPU percentage is computed over.
const minSampleGap = 250 * time.Millisecond

// metricsSampler reads the box's CPU and memory usage.
type metricsSampler struct {
	root     string // where /proc and /sys are found: "/" but in tests
	numCPU   int
	interval atomic.Int64 // nanoseconds between /metrics/watch events

	mu      sync.Mutex
	prev    cpuReading
	lastPct float64

	stop     chan struct{} // closed by closeMetrics: watches end
	stopOnce sync.Once
}

// cpuReading is one reading of a cumulative CPU counter.
type cpuReading struct {
	ok     bool
	cgroup bool      // busy is cgroup CPU time in seconds, total unused
	at     time.Time // when read
	busy   float64   // /proc/stat: busy ticks
	total  float64   // /proc/stat: all ticks
}

func newMetricsSampler(root string, numCPU int) *metricsSampler {
	m := &metricsSampler{root: root, numCPU: numCPU, stop: make(chan struct{})}
	m.interval.Store(int64(time.Second))
	_, _ = m.read() // the baseline of the first CPU percentage
	return m
}

func (s *Server) registerMetrics() {
	s.metrics = newMetricsSampler("/", runtime.NumCPU())
	s.mux.HandleFunc("GET /metrics", s.handleMetrics)
	s.mux.HandleFunc("GET /metrics/watch", s.handleWatchMetrics)
}

// closeMetrics ends every /metrics/watch stream.
func (s *Server) closeMetrics() {
	s.metrics.stopOnce.Do(func() { close(s.metrics.stop) })
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	m, err := s.metrics.read()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, m)
}

// handleWatchMetrics streams a Metrics event at once and then every
// interval until the client leaves or execd closes. Events are unnamed
// (EventSource "message") and carry a Metrics object as data.
func (s *Server) handleWatchMetrics(w http.ResponseWriter, r *http.Request) {
	sw := sse.NewWriter(w)
	tick := time.NewTicker(time.Duration(s.metrics.interval.Load()))
	defer tick.Stop()
	for {
		m, err := s.metrics.read()
		if err != nil {
			_ = sw.Event("", wire.EventError, wire.ErrorResponse{Code: string(sandbox.CodeOf(err)), Message: sandbox.MessageOf(err)})
			return
		}
		if err := sw.Event("", "", m); err != nil {
			return
		}
		select {
		case <-tick.C:
		case <-r.Context().Done():
			return
		case <-s.metrics.stop:
			return
		}
	}
}

// read takes a reading. It fails with RUNTIME_ERROR only when no memory
// figure can be read at all.
func (m *metricsSampler) read() (wire.Metrics, error) {
	now := time.Now()
	memTotal, memUsed, err := m.memory()
	if err != nil {
		return wire.Metrics{}, err
	}
	cpus, limited := m.cpuCount()
	cur := m.cpuReading(limited, now)

	m.mu.Lock()
	switch {
	case !cur.ok:
	case !m.prev.ok || m.prev.cgroup != cur.cgroup:
		m.prev = cur
	case cur.at.Sub(m.prev.at) >= minSampleGap:
		m.lastPct = cpuPercent(m.prev, cur, cpus)
		m.prev = cur
	}
	pct := m.lastPct
	m.mu.Unlock()

	return wire.Metrics{
		CPUCount:    cpus,
		CPUUsedPct:  pct,
		MemTotalMiB: float64(memTotal) / (1 << 20),
		MemUsedMiB:  float64(memUsed) / (1 << 20),
		Timestamp:   now.UnixMilli(),
	}, nil
}

// cpuPercent is the CPU used between two readings of the same kind, in
// percent of cpus, clamped to [0, 100].
func cpuPercent(prev, cur cpuReading, cpus float64) float64 {
	var pct float64
	if cur.cgroup {
		wall := cur.at.Sub(prev.at).Seconds()
		if wall <= 0 || cpus <= 0 {
			return 0
		}
		pct = (cur.busy - prev.busy) / (wall * cpus) * 100
	} else {
		dt := cur.total - prev.total
		if dt <= 0 {
			return 0
		}
		pct = (cur.busy - prev.busy) / dt * 100
	}
	return min(max(pct, 0), 100)
}

// memory returns the box's memory total and use, in bytes.
func (m *metricsSampler) memory() (total, used uint64, err error) {
	hostTotal, hostAvail, hostErr := m.meminfo()
	limit, usage, ok := m.cgroupMemory()
	if ok && limit > 0 && (hostErr != nil || limit < hostTotal) {
		return limit, min(usage, limit), nil
	}
	if hostErr != nil {
		return 0, 0, sandbox.Errorf(sandbox.CodeRuntime, "read memory usage: %v", hostErr)
	}
	return hostTotal, hostTotal - min(hostAvail, hostTotal), nil
}

// meminfo reads MemTotal and MemAvailable (older kernels: free + buffers +
// cached) from /proc/meminfo, in bytes.
func (m *metricsSampler) meminfo() (total, avail uint64, err error) {
	b, err := os.ReadFile(m.path("proc/meminfo"))
	if err != nil {
		return 0, 0, err
	}
	kv := make(map[string]uint64)
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		if n, err := strconv.ParseUint(f[0], 10, 64); err == nil {
			kv[k] = n << 10
		}
	}
	total = kv["MemTotal"]
	if total == 0 {
		return 0, 0, sandbox.Errorf(sandbox.CodeRuntime, "no MemTotal in /proc/meminfo")
	}
	avail, ok := kv["MemAvailable"]
	if !ok {
		avail = kv["MemFree"] + kv["Buffers"] + kv["Cached"]
	}
	return total, avail, nil
}

// cgroupMemory returns the memory limit and usage (less inactive file
// cache) of execd's cgroup; ok is false without a limit.
func (m *metricsSampler) cgroupMemory() (limit, usage uint64, ok bool) {
	if dir, v2 := m.cgroupDir(""); v2 {
		s, err := m.readFile(dir, "memory.max")
		if err != nil || s == "max" {
			return 0, 0, false
		}
		limit, err = strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		usage, _ = m.readUint(dir, "memory.current")
		usage -= min(m.statValue(dir, "memory.stat", "inactive_file"), usage)
		return limit, usage, true
	}
	dir, _ := m.cgroupDir("memory")
	limit, err := m.readUint(dir, "memory.limit_in_bytes")
	if err != nil || limit >= 1<<60 {
		return 0, 0, false
	}
	usage, _ = m.readUint(dir, "memory.usage_in_bytes")
	usage -= min(m.statValue(dir, "memory.stat", "total_inactive_file"), usage)
	return limit, usage, true
}

// cpuCount is the number of CPUs the box may use: its CPU quota when one is
// set (limited), else the CPUs execd may run on.
func (m *metricsSampler) cpuCount() (count float64, limited bool) {
	host := float64(max(m.numCPU, 1))
	var quota, period float64
	if dir, v2 := m.cgroupDir(""); v2 {
		s, err := m.readFile(dir, "cpu.max")
		f := strings.Fields(s)
		if err != nil || len(f) != 2 || f[0] == "max" {
			return host, false
		}
		quota, _ = strconv.ParseFloat(f[0], 64)
		period, _ = strconv.ParseFloat(f[1], 64)
	} else {
		dir, _ := m.cgroupDir("cpu")
		q, err1 := m.readFile(dir, "cpu.cfs_quota_us")
		p, err2 := m.readFile(dir, "cpu.cfs_period_us")
		if err1 != nil || err2 != nil {
			return host, false
		}
		quota, _ = strconv.ParseFloat(q, 64)
		period, _ = strconv.ParseFloat(p, 64)
	}
	if quota <= 0 || period <= 0 {
		return host, false
	}
	return min(quota/period, host), true
}

// cpuReading reads the cgroup's CPU time when the CPU is limited, else the
// host's /proc/stat counters.
func (m *metricsSampler) cpuReading(limited bool, now time.Time) cpuReading {
	if limited {
		if dir, v2 := m.cgroupDir(""); v2 {
			if usec := m.statValue(dir, "cpu.stat", "usage_usec"); usec > 0 {
				return cpuReading{ok: true, cgroup: true, at: now, busy: float64(usec) / 1e6}
			}
		} else {
			dir, _ := m.cgroupDir("cpuacct")
			if ns, err := m.readUint(dir, "cpuacct.usage"); err == nil {
				return cpuReading{ok: true, cgroup: true, at: now, busy: float64(ns) / 1e9}
			}
		}
	}
	b, err := os.ReadFile(m.path("proc/stat"))
	if err != nil {
		return cpuReading{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuReading{}
	}
	var total, idle float64
	for i, s := range f[1:min(len(f), 9)] { // user nice system idle iowait irq softirq steal
		v, _ := strconv.ParseFloat(s, 64)
		total += v
		if i == 3 || i == 4 {
			idle += v
		}
	}
	return cpuReading{ok: true, at: now, busy: total - idle, total: total}
}

// cgroupDir returns the directory of execd's cgroup for a v1 controller
// (v2 when the unified hierarchy is mounted at /sys/fs/cgroup, in which
// case controller is ignored). It prefers the directory named by
// /proc/self/cgroup and falls back to the hierarchy's root, which is the
// box's own cgroup under a cgroup namespace.
func (m *metricsSampler) cgroupDir(controller string) (dir string, v2 bool) {
	base := m.path("sys/fs/cgroup")
	if _, err := os.Stat(filepath.Join(base, "cgroup.controllers")); err == nil {
		return m.ownCgroup(base, ""), true
	}
	mount := filepath.Join(base, controller)
	if _, err := os.Stat(mount); err != nil && (controller == "cpu" || controller == "cpuacct") {
		for _, alt := range []string{"cpu,cpuacct", "cpuacct,cpu"} {
			if _, err := os.Stat(filepath.Join(base, alt)); err == nil {
				mount = filepath.Join(base, alt)
				break
			}
		}
	}
	return m.ownCgroup(mount, controller), false
}

// ownCgroup joins mount with execd's cgroup path for controller ("" for
// v2) when that directory exists, else returns mount.
func (m *metricsSampler) ownCgroup(mount, controller string) string {
	b, err := os.ReadFile(m.path("proc/self/cgroup"))
	if err != nil {
		return mount
	}
	for _, line := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		match := controller == "" && parts[0] == "0" && parts[1] == ""
		if controller != "" {
			for _, c := range strings.Split(parts[1], ",") {
				match = match || c == controller
			}
		}
		if !match || parts[2] == "/" {
			continue
		}
		dir := filepath.Join(mount, filepath.Clean("/"+parts[2]))
		if _, err := os.Stat(dir); err == nil {
			return dir
		}
	}
	return mount
}

func (m *metricsSampler) path(rel string) string { return filepath.Join(m.root, rel) }

func (m *metricsSampler) readFile(dir, name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	return strings.TrimSpace(string(b)), err
}

func (m *metricsSampler) readUint(dir, name string) (uint64, error) {
	s, err := m.readFile(dir, name)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(s, 10, 64)
}

// statValue returns key's value in a "key value" file such as memory.stat
// or cpu.stat, or 0.
func (m *metricsSampler) statValue(dir, name, key string) uint64 {
	s, err := m.readFile(dir, name)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(s, "\n") {
		if k, v, ok := strings.Cut(line, " "); ok && k == key {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}
