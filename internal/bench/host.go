package bench

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// hostCounts is what the host holds that a sandbox could leave behind.
type hostCounts struct{ mounts, cgroups, procs, links int }

// snapshot counts the host's mounts, cgroups, processes and network
// links, whoever made them: a difference after a run that deleted all it
// created is a leak.
func snapshot() hostCounts {
	var s hostCounts
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
			if c := e.Name()[0]; c >= '0' && c <= '9' {
				s.procs++
			}
		}
	}
	if ifs, err := net.Interfaces(); err == nil {
		s.links = len(ifs)
	}
	return s
}

func (s hostCounts) diff(before hostCounts) string {
	return fmt.Sprintf("%+d mounts, %+d cgroups, %+d processes, %+d network links on the host", s.mounts-before.mounts,
		s.cgroups-before.cgroups, s.procs-before.procs, s.links-before.links)
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
