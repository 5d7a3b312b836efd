package procfs

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// UIDs returns the uids (real, effective, saved and filesystem) of every
// process of the host's /proc that could be read: a process that ended
// meanwhile is skipped.
func UIDs() map[int]bool {
	out := map[int]bool{}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/status")
		if err != nil {
			continue
		}
		for _, uid := range ParseUIDs(b) {
			out[uid] = true
		}
	}
	return out
}

// ParseUIDs returns the uids of a /proc/PID/status's "Uid:" line (none
// when it has none that parse).
func ParseUIDs(status []byte) []int {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := bytes.CutPrefix(sc.Bytes(), []byte("Uid:"))
		if !ok {
			continue
		}
		var out []int
		for _, f := range bytes.Fields(rest) {
			if n, err := strconv.Atoi(string(f)); err == nil && n >= 0 {
				out = append(out, n)
			}
		}
		return out
	}
	return nil
}
