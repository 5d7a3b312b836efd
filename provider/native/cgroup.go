package native

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// cgroups manages the cgroups of boxes under one parent group named
// "astrabox", on a cgroup v2 (unified) host or a v1 (or hybrid) one.
type cgroups struct {
	root   string // mount point: /sys/fs/cgroup
	v2     bool
	parent string // group under which boxes live, relative to each hierarchy
	memsw  bool   // v1: memory.memsw.* exists (swap accounting)
}

// v1Controllers are the hierarchies a box joins on cgroup v1.
var v1Controllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer"}

// detectCgroups inspects root (normally /sys/fs/cgroup).
func detectCgroups(root, parent string) (*cgroups, error) {
	cg := &cgroups{root: root, parent: parent}
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err == nil {
		cg.v2 = true
		p := filepath.Join(root, parent)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", p, err)
		}
		// Delegate the controllers boxes need to the parent's children.
		for _, dir := range []string{root, p} {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644); err != nil {
				return nil, fmt.Errorf("enable cgroup controllers in %s: %w", dir, err)
			}
		}
		return cg, nil
	}
	for _, c := range v1Controllers {
		if _, err := os.Stat(filepath.Join(root, c)); err != nil {
			return nil, fmt.Errorf("cgroup v1 controller %s is not mounted: %w", c, err)
		}
		if err := os.MkdirAll(filepath.Join(root, c, parent), 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup: %w", err)
		}
	}
	_, err := os.Stat(filepath.Join(root, "memory", parent, "memory.memsw.limit_in_bytes"))
	cg.memsw = err == nil
	return cg, nil
}

// dirs returns every cgroup directory of box id.
func (cg *cgroups) dirs(id string) []string {
	if cg.v2 {
		return []string{filepath.Join(cg.root, cg.parent, id)}
	}
	out := make([]string, len(v1Controllers))
	for i, c := range v1Controllers {
		out[i] = filepath.Join(cg.root, c, cg.parent, id)
	}
	return out
}

func (cg *cgroups) dir(controller, id string) string {
	if cg.v2 {
		return filepath.Join(cg.root, cg.parent, id)
	}
	return filepath.Join(cg.root, controller, cg.parent, id)
}

// create makes the box's cgroups and sets its limits.
func (cg *cgroups) create(id string, r sandbox.Resources) error {
	for _, d := range cg.dirs(id) {
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", d, err)
		}
	}
	period := int64(100000)
	quota := r.MilliCPU * period / 1000
	var writes [][2]string
	if cg.v2 {
		d := cg.dir("", id)
		writes = [][2]string{
			{filepath.Join(d, "memory.max"), strconv.FormatInt(r.MemoryBytes, 10)},
			{filepath.Join(d, "memory.swap.max"), "0"},
			{filepath.Join(d, "pids.max"), strconv.FormatInt(r.PIDs, 10)},
			{filepath.Join(d, "cpu.max"), fmt.Sprintf("%d %d", quota, period)},
		}
	} else {
		mem := cg.dir("memory", id)
		writes = [][2]string{
			{filepath.Join(mem, "memory.limit_in_bytes"), strconv.FormatInt(r.MemoryBytes, 10)},
			{filepath.Join(cg.dir("pids", id), "pids.max"), strconv.FormatInt(r.PIDs, 10)},
			{filepath.Join(cg.dir("cpu", id), "cpu.cfs_period_us"), strconv.FormatInt(period, 10)},
			{filepath.Join(cg.dir("cpu", id), "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10)},
		}
		if cg.memsw {
			// memsw must not be below the memory limit; it equals it: no swap.
			writes = append(writes, [2]string{filepath.Join(mem, "memory.memsw.limit_in_bytes"), strconv.FormatInt(r.MemoryBytes, 10)})
		}
	}
	for _, w := range writes {
		if err := os.WriteFile(w[0], []byte(w[1]), 0o644); err != nil {
			return fmt.Errorf("set %s: %w", w[0], err)
		}
	}
	return nil
}

// dirMap returns the box's cgroup directories by v1 controller ("" for v2).
func (cg *cgroups) dirMap(id string) map[string]string {
	if cg.v2 {
		return map[string]string{"": cg.dir("", id)}
	}
	out := map[string]string{}
	for _, c := range v1Controllers {
		out[c] = cg.dir(c, id)
	}
	return out
}

// removeParent removes the (empty) parent group from every hierarchy.
func (cg *cgroups) removeParent() error {
	dirs := []string{filepath.Join(cg.root, cg.parent)}
	if !cg.v2 {
		dirs = dirs[:0]
		for _, c := range v1Controllers {
			dirs = append(dirs, filepath.Join(cg.root, c, cg.parent))
		}
	}
	var errs []error
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// join moves pid into every cgroup of the box.
func (cg *cgroups) join(id string, pid int) error {
	for _, d := range cg.dirs(id) {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("join cgroup %s: %w", d, err)
		}
	}
	return nil
}

// procs lists the processes in the box's cgroup (the pids controller on v1).
func (cg *cgroups) procs(id string) ([]int, error) {
	f, err := os.Open(filepath.Join(cg.dir("pids", id), "cgroup.procs"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cgroup procs: %w", err)
	}
	defer f.Close()
	var out []int
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if pid, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
			out = append(out, pid)
		}
	}
	return out, sc.Err()
}

// freeze freezes (true) or thaws (false) every process of the box and
// waits until the kernel reports the new state.
func (cg *cgroups) freeze(id string, frozen bool) error {
	file, want := "freezer.state", "THAWED"
	if frozen {
		want = "FROZEN"
	}
	value := want
	if cg.v2 {
		file, value = "cgroup.freeze", "0"
		if frozen {
			value = "1"
		}
	}
	path := filepath.Join(cg.dir("freezer", id), file)
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("freeze %s: %w", id, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := cg.frozen(id)
		if err != nil {
			return err
		}
		if got == frozen {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("freeze %s: still not %s after 10s", id, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// frozen reports whether the box is frozen.
func (cg *cgroups) frozen(id string) (bool, error) {
	if cg.v2 {
		b, err := os.ReadFile(filepath.Join(cg.dir("", id), "cgroup.events"))
		if err != nil {
			return false, fmt.Errorf("read cgroup events: %w", err)
		}
		return strings.Contains(string(b), "frozen 1"), nil
	}
	b, err := os.ReadFile(filepath.Join(cg.dir("freezer", id), "freezer.state"))
	if err != nil {
		return false, fmt.Errorf("read freezer state: %w", err)
	}
	return strings.TrimSpace(string(b)) == "FROZEN", nil
}

// killAll kills every process of the box: frozen first so nothing forks
// meanwhile, SIGKILLed, then thawed so the kills are delivered. It waits
// until the cgroup is empty.
func (cg *cgroups) killAll(id string) error {
	if _, err := os.Stat(cg.dir("pids", id)); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if cg.v2 {
		if err := os.WriteFile(filepath.Join(cg.dir("", id), "cgroup.kill"), []byte("1"), 0o644); err == nil {
			return cg.waitEmpty(id)
		}
	}
	_ = cg.freeze(id, true)
	pids, err := cg.procs(id)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = cg.freeze(id, false)
	return cg.waitEmpty(id)
}

func (cg *cgroups) waitEmpty(id string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids, err := cg.procs(id)
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup of %s still has %d processes", id, len(pids))
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(time.Millisecond)
	}
}

// remove deletes the box's cgroups; they must be empty.
func (cg *cgroups) remove(id string) error {
	for _, d := range cg.dirs(id) {
		deadline := time.Now().Add(10 * time.Second)
		for {
			err := syscall.Rmdir(d)
			if err == nil || errors.Is(err, syscall.ENOENT) {
				break
			}
			if !errors.Is(err, syscall.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("remove cgroup %s: %w", d, err)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// list returns the ids of every box cgroup (from the pids hierarchy).
func (cg *cgroups) list() ([]string, error) {
	parent := filepath.Join(cg.root, cg.parent)
	if !cg.v2 {
		parent = filepath.Join(cg.root, "pids", cg.parent)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		return nil, fmt.Errorf("list cgroups: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// memoryUsage returns the box's charged memory in bytes.
func (cg *cgroups) memoryUsage(id string) (int64, error) {
	file := "memory.usage_in_bytes"
	if cg.v2 {
		file = "memory.current"
	}
	b, err := os.ReadFile(filepath.Join(cg.dir("memory", id), file))
	if err != nil {
		return 0, fmt.Errorf("read memory usage: %w", err)
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}

// oomKills returns how many processes of the box the kernel's OOM killer
// has killed at the box's memory limit: oom_kill of memory.events (v2) or
// of memory.oom_control (v1, Linux 4.13 and later). A cgroup that does not
// say is reported as an error.
func (cg *cgroups) oomKills(id string) (int64, error) {
	file := "memory.oom_control"
	if cg.v2 {
		file = "memory.events"
	}
	b, err := os.ReadFile(filepath.Join(cg.dir("memory", id), file))
	if err != nil {
		return 0, fmt.Errorf("read OOM kills: %w", err)
	}
	return oomKillCount(string(b))
}

// oomKillCount reads the oom_kill line of a memory.events or
// memory.oom_control file.
func oomKillCount(events string) (int64, error) {
	for _, line := range strings.Split(events, "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("read OOM kills: %q: %w", line, err)
			}
			return n, nil
		}
	}
	return 0, errors.New("read OOM kills: the cgroup does not count them")
}

// memoryLimit returns the box's memory limit in bytes.
func (cg *cgroups) memoryLimit(id string) (int64, error) {
	file := "memory.limit_in_bytes"
	if cg.v2 {
		file = "memory.max"
	}
	b, err := os.ReadFile(filepath.Join(cg.dir("memory", id), file))
	if err != nil {
		return 0, fmt.Errorf("read memory limit: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read memory limit: %w", err)
	}
	return n, nil
}
