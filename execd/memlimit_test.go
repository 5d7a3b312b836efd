package execd

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCgroupMemoryLimit reads the memory limit from fake cgroup files:
// cgroup v2 and v1, inside a cgroup namespace (the box's group is the
// mount's root) and outside one, limits on ancestors, and no limit.
func TestCgroupMemoryLimit(t *testing.T) {
	const v1Max = "9223372036854771712"
	for _, tt := range []struct {
		name    string
		files   map[string]string // relative to the fake root
		limit   int64
		ok      bool
		wantErr bool
	}{
		{name: "v2 in a cgroup namespace", files: map[string]string{
			"proc/self/cgroup":          "0::/\n",
			"sys/fs/cgroup/memory.max":  "268435456\n",
			"sys/fs/cgroup/memory.high": "max\n",
		}, limit: 256 << 20, ok: true},
		{name: "v2 max", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "max\n",
		}},
		{name: "v2 nested, the limit on an ancestor", files: map[string]string{
			"proc/self/cgroup":                           "0::/kubepods/pod1/box\n",
			"sys/fs/cgroup/kubepods/pod1/box/memory.max": "max\n",
			"sys/fs/cgroup/kubepods/pod1/memory.max":     "134217728\n",
			"sys/fs/cgroup/kubepods/memory.max":          "8589934592\n",
		}, limit: 128 << 20, ok: true},
		{name: "v2 the smallest of the path wins", files: map[string]string{
			"proc/self/cgroup":                  "0::/a/b\n",
			"sys/fs/cgroup/a/b/memory.max":      "67108864\n",
			"sys/fs/cgroup/a/memory.max":        "134217728\n",
			"sys/fs/cgroup/memory.max":          "max\n",
			"sys/fs/cgroup/a/b/memory.swap.max": "0\n",
		}, limit: 64 << 20, ok: true},
		{name: "v2 path outside the namespace's mount", files: map[string]string{
			"proc/self/cgroup":         "0::/../../elsewhere\n",
			"sys/fs/cgroup/memory.max": "33554432\n",
		}, limit: 32 << 20, ok: true},
		{name: "v2 host root, no limit file", files: map[string]string{
			"proc/self/cgroup":               "0::/\n",
			"sys/fs/cgroup/cgroup.procs":     "1\n",
			"sys/fs/cgroup/cgroup.subtree":   "",
			"sys/fs/cgroup/memory.pressure":  "",
			"sys/fs/cgroup/memory.stat":      "",
			"sys/fs/cgroup/memory.numa_stat": "",
		}},
		{name: "v1 in a cgroup namespace", files: map[string]string{
			"proc/self/cgroup":                             "5:pids:/\n4:memory:/\n1:cpu,cpuacct:/\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":   "67108864\n",
			"sys/fs/cgroup/pids/pids.max":                  "512\n",
			"sys/fs/cgroup/unified/cgroup.controllers":     "",
			"sys/fs/cgroup/memory/memory.usage_in_bytes":   "1000\n",
			"sys/fs/cgroup/memory/memory.soft_limit_bytes": v1Max + "\n",
		}, limit: 64 << 20, ok: true},
		{name: "v1 unlimited", files: map[string]string{
			"proc/self/cgroup": "4:memory:/process/x\n0::/\n",
			"sys/fs/cgroup/memory/process/x/memory.limit_in_bytes": v1Max + "\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes":           v1Max + "\n",
		}},
		{name: "v1 host path not under the container's mount", files: map[string]string{
			"proc/self/cgroup":                           "12:memory:/docker/0123abcd\n0::/system.slice/docker.service\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
		}, limit: 512 << 20, ok: true},
		{name: "v1 combined controllers", files: map[string]string{
			"proc/self/cgroup":                           "3:memory,hugetlb:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "100000000\n",
		}, limit: 100000000, ok: true},
		{name: "hybrid: both hierarchies, the smaller wins", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n0::/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "268435456\n",
			"sys/fs/cgroup/memory.max":                   "134217728\n",
		}, limit: 128 << 20, ok: true},
		{name: "no cgroup files at all", files: map[string]string{
			"proc/self/cgroup": "0::/\n",
		}},
		{name: "malformed lines are skipped", files: map[string]string{
			"proc/self/cgroup":         "garbage\n\n0::/\n",
			"sys/fs/cgroup/memory.max": "1048576\n",
		}, limit: 1 << 20, ok: true},
		{name: "no /proc/self/cgroup", files: map[string]string{}, wantErr: true},
		{name: "a limit that is no number", files: map[string]string{
			"proc/self/cgroup":         "0::/\n",
			"sys/fs/cgroup/memory.max": "lots\n",
		}, wantErr: true},
		{name: "a negative limit", files: map[string]string{
			"proc/self/cgroup":                           "4:memory:/\n",
			"sys/fs/cgroup/memory/memory.limit_in_bytes": "-1\n",
		}, wantErr: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(root, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			limit, ok, err := CgroupMemoryLimit(root)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, want one: %t", err, tt.wantErr)
			}
			if limit != tt.limit || ok != tt.ok {
				t.Fatalf("limit %d ok %t, want %d %t", limit, ok, tt.limit, tt.ok)
			}
		})
	}
}

// TestSizeOutput sizes output retention from a box's memory limit.
func TestSizeOutput(t *testing.T) {
	const def, defStream = 128 << 20, 8 << 20
	for _, tt := range []struct {
		name                     string
		total, perStream, memory int64
		wantTotal, wantPerStream int64
	}{
		{"no limit keeps the configured figures", def, defStream, 0, def, defStream},
		{"a negative limit is none", def, defStream, -1, def, defStream},
		{"256 MiB box: an eighth", def, defStream, 256 << 20, 32 << 20, defStream},
		{"a large box keeps the default", def, defStream, 4 << 30, def, defStream},
		{"64 MiB box: the stream limit follows the total", def, defStream, 64 << 20, 8 << 20, 8 << 20},
		{"32 MiB box: the floor", def, defStream, 32 << 20, MinOutputTotal, MinOutputTotal},
		{"a tiny limit still gets the floor", def, defStream, 1 << 20, MinOutputTotal, MinOutputTotal},
		{"a smaller configured total wins", 1 << 20, defStream, 256 << 20, 1 << 20, 1 << 20},
		{"a configured total above the share loses", 1 << 30, defStream, 256 << 20, 32 << 20, defStream},
		{"a smaller configured stream limit wins", def, 256 << 10, 64 << 20, 8 << 20, 256 << 10},
	} {
		t.Run(tt.name, func(t *testing.T) {
			total, perStream := sizeOutput(tt.total, tt.perStream, tt.memory)
			if total != tt.wantTotal || perStream != tt.wantPerStream {
				t.Fatalf("sizeOutput(%d, %d, %d) = %d, %d; want %d, %d", tt.total, tt.perStream, tt.memory, total, perStream, tt.wantTotal, tt.wantPerStream)
			}
		})
	}
}

// TestNewSizesOutputFromMemoryLimit: a Server for a box with a memory
// limit retains at most its share, whatever was configured, and says so
// in its status.
func TestNewSizesOutputFromMemoryLimit(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       Config
		wantTotal int64
		wantLimit int64
	}{
		{"defaults in a 256 MiB box", Config{MemoryLimit: 256 << 20}, 32 << 20, 8 << 20},
		{"an explicit larger total in a 256 MiB box", Config{MemoryLimit: 256 << 20, OutputTotal: 1 << 30}, 32 << 20, 8 << 20},
		{"an explicit smaller total", Config{MemoryLimit: 256 << 20, OutputTotal: 2 << 20}, 2 << 20, 2 << 20},
		{"no limit", Config{MemoryLimit: -1}, 128 << 20, 8 << 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.cfg)
			defer s.Close()
			if s.cfg.OutputTotal != tt.wantTotal || s.cfg.OutputLimit != tt.wantLimit {
				t.Fatalf("total %d, per stream %d; want %d, %d", s.cfg.OutputTotal, s.cfg.OutputLimit, tt.wantTotal, tt.wantLimit)
			}
		})
	}
}
