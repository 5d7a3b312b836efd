package execd

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// Output retention is sized from the memory limit of the box execd runs
// in: what execd retains is charged to that limit, next to the box's own
// processes, so a box must not be able to make execd take it all.
const (
	// OutputMemoryShare is the share of the box's memory limit that
	// retained output may take at most: 1/OutputMemoryShare of it.
	OutputMemoryShare = 8
	// MinOutputTotal is the least total retention a memory limit sizes
	// (a smaller configured total still wins): 1/8 of the smallest box the
	// server allows (32 MiB).
	MinOutputTotal = 4 << 20
)

// v1Unlimited is the least cgroup v1 memory.limit_in_bytes that means no
// limit (the kernel reports its page counter's maximum, 2^63 rounded down
// to a page).
const v1Unlimited = 1 << 60

// CgroupMemoryLimit returns the memory limit that applies to the calling
// process: the smallest limit of its own cgroup and of every ancestor
// visible under root/sys/fs/cgroup, read from cgroup v2's memory.max and
// cgroup v1's memory.limit_in_bytes, with the cgroup paths of
// root/proc/self/cgroup. root is "/" on a live system (tests pass a
// directory of fake files). Inside a cgroup namespace, where the box's own
// group is the mount's root, that group's limit is the mount's.
//
// ok is false when no limit applies: every file read says "max" (v2) or
// the unlimited value (v1), or none exists. err is set when
// root/proc/self/cgroup cannot be read or a limit file holds something
// else than a number or "max"; the limit is then unknown.
func CgroupMemoryLimit(root string) (limit int64, ok bool, err error) {
	f, err := os.Open(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0, false, fmt.Errorf("cgroup memory limit: %w", err)
	}
	defer f.Close()
	mount := filepath.Join(root, "sys", "fs", "cgroup")
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var dir, file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			dir, file = mount, "memory.max"
		case hasController(parts[1], "memory"):
			dir, file = filepath.Join(mount, "memory"), "memory.limit_in_bytes"
		default:
			continue
		}
		l, found, err := smallestLimit(dir, parts[2], file)
		if err != nil {
			return 0, false, err
		}
		if found && (!ok || l < limit) {
			limit, ok = l, true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("cgroup memory limit: %w", err)
	}
	return limit, ok, nil
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// smallestLimit reads file in the directory of cgroup cg under mount and
// in each of its ancestors up to the mount's root, skipping those that do
// not exist (a path outside the cgroup namespace, or the real root, which
// has no limit file); found is false when none holds a limit.
func smallestLimit(mount, cg, file string) (limit int64, found bool, err error) {
	cg = path.Clean("/" + cg)
	for {
		b, err := os.ReadFile(filepath.Join(mount, filepath.FromSlash(cg), file))
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return 0, false, fmt.Errorf("cgroup memory limit: %w", err)
		default:
			l, limited, err := parseLimit(strings.TrimSpace(string(b)))
			if err != nil {
				return 0, false, fmt.Errorf("cgroup memory limit: %s: %w", filepath.Join(cg, file), err)
			}
			if limited && (!found || l < limit) {
				limit, found = l, true
			}
		}
		if cg == "/" {
			return limit, found, nil
		}
		cg = path.Dir(cg)
	}
}

// parseLimit reads a limit file's value: "max" or v1's unlimited value is
// no limit.
func parseLimit(s string) (int64, bool, error) {
	if s == "max" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, false, fmt.Errorf("not a memory limit: %q", s)
	}
	if n >= v1Unlimited {
		return 0, false, nil
	}
	return n, true, nil
}

// sizeOutput returns the total and per-stream output retention of a box
// whose memory limit is memLimit (<= 0: none), given the configured ones:
// the total is at most 1/OutputMemoryShare of the limit, but not below
// MinOutputTotal unless the configured total is; a stream never retains
// more than the total.
func sizeOutput(total, perStream, memLimit int64) (int64, int64) {
	if memLimit > 0 {
		total = min(total, max(memLimit/OutputMemoryShare, MinOutputTotal))
	}
	return total, min(perStream, total)
}
