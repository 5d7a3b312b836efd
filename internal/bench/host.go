package bench

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// hostCounts is what the host holds that a sandbox could leave behind.
// rules counts AstraBox's iptables rules and chains (-1: iptables-save is
// not installed); files counts the entries under the target's data dir
// (-1: none named).
type hostCounts struct{ mounts, cgroups, procs, links, rules, files int }

// snapshot counts the host's mounts, cgroups, processes and network
// links, whoever made them, AstraBox's firewall rules and the files under
// dataDir ("": not counted): a difference after a run that deleted all it
// created is a leak.
func snapshot(dataDir string) hostCounts {
	s := hostCounts{rules: -1, files: -1}
	if b, err := os.ReadFile("/proc/self/mountinfo"); err == nil {
		s.mounts = strings.Count(string(b), "\n")
	}
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			s.cgroups++
		}
		return nil
	})
	if entries, err := os.ReadDir("/proc"); err == nil {
		for _, e := range entries {
			if c := e.Name()[0]; c >= '0' && c <= '9' && !kernelThread(e.Name()) {
				s.procs++
			}
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		s.links = len(ifs)
	}
	if out, err := exec.Command("iptables-save").Output(); err == nil {
		s.rules = 0
		for _, line := range strings.Split(string(out), "\n") {
			if strings.Contains(line, "ASTRABOX") || strings.Contains(line, "abx+") || strings.Contains(line, "abl+") {
				s.rules++
			}
		}
	}
	if dataDir != "" {
		s.files = 0
		_ = filepath.WalkDir(dataDir, func(path string, d fs.DirEntry, err error) error {
			if err == nil && path != dataDir {
				s.files++
			}
			return nil
		})
	}
	return s
}

// leaks describes what s holds beyond before ("" when nothing), and counts
// it. Processes and links of other programs on the host come and go too:
// only growth counts.
func (s hostCounts) leaks(before hostCounts) (string, int) {
	var parts []string
	total := 0
	for _, c := range []struct {
		what          string
		before, after int
	}{{"mounts", before.mounts, s.mounts}, {"cgroups", before.cgroups, s.cgroups}, {"processes", before.procs, s.procs},
		{"network links", before.links, s.links}, {"firewall rules", before.rules, s.rules}, {"files in the data dir", before.files, s.files}} {
		if c.after > c.before {
			parts = append(parts, fmt.Sprintf("%+d %s", c.after-c.before, c.what))
			total += c.after - c.before
		}
	}
	return strings.Join(parts, ", "), total
}

func (s hostCounts) diff(before hostCounts) string {
	return fmt.Sprintf("%+d mounts, %+d cgroups, %+d processes, %+d network links, %+d firewall rules, %+d files in the data dir on the host",
		s.mounts-before.mounts, s.cgroups-before.cgroups, s.procs-before.procs, s.links-before.links, s.rules-before.rules, s.files-before.files)
}

// connect returns a client of a box's execd, reached through p.
func connect(p sandbox.Provider, info sandbox.Info, opts ...execdclient.Option) *execdclient.Client {
	opts = append([]execdclient.Option{execdclient.WithToken(info.AccessToken), execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return p.Dial(ctx, info.ID)
	})}, opts...)
	return execdclient.New("http://execd", opts...)
}

// warmPoolSize is the pool the create scenario claims from.
const warmPoolSize = 4

// waitPoolFull polls the server's metrics until pool (a profile name)
// holds size ready boxes.
func (s *suite) waitPoolFull(ctx context.Context, pool string, size int) error {
	deadline := time.Now().Add(2 * time.Minute)
	prefix := `astrabox_pool_ready{pool="` + pool + `/`
	for {
		text, err := s.c.Metrics(ctx)
		if err != nil {
			return err
		}
		ready := 0
		for _, line := range strings.Split(text, "\n") {
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				if i := strings.LastIndexByte(rest, ' '); i >= 0 {
					n, _ := strconv.Atoi(rest[i+1:])
					ready += n
				}
			}
		}
		if ready >= size {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("warm pool %s holds %d of %d boxes after 2 minutes", pool, ready, size)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// kernelThread reports whether process pid is a kernel thread (the
// kernel starts and ends its workers as it likes; they are nobody's
// leak): its parent is kthreadd (pid 2), or it is kthreadd.
func kernelThread(pid string) bool {
	if pid == "2" {
		return true
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	return len(f) > 1 && f[1] == "2"
}
