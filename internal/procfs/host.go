package procfs

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// MemTotal returns the host's RAM in bytes (MemTotal of /proc/meminfo).
func MemTotal() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	return ParseMemTotal(b)
}

// ParseMemTotal reads MemTotal, in bytes, from the text of /proc/meminfo.
func ParseMemTotal(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb <= 0 || kb > 1<<43 {
			break
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("procfs: no MemTotal line in kB in /proc/meminfo")
}

// PIDMax returns the kernel's pid_max: no pids limit can exceed it.
func PIDMax() (int64, error) {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return 0, fmt.Errorf("procfs: %w", err)
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("procfs: malformed pid_max %q", bytes.TrimSpace(b))
	}
	return n, nil
}
