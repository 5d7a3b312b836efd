// Package procfs reads the few facts AstraBox needs from /proc.
package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrFormat reports a /proc/PID/stat line that does not parse.
var ErrFormat = errors.New("procfs: malformed stat line")

// Stat returns the state letter ('R', 'S', 'Z', ...) and the start time (in
// clock ticks since boot, which with the pid identifies a process across
// pid reuse) of process pid.
func Stat(pid int) (state byte, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("procfs: %w", err)
	}
	return ParseStat(b)
}

// ParseStat parses a /proc/PID/stat line. The command name (field 2) may
// hold spaces and parentheses, so fields are counted after its last ')'.
func ParseStat(b []byte) (state byte, start uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, ErrFormat
	}
	fields := bytes.Fields(b[i+1:])
	// fields[0] is field 3 (state); the start time is field 22.
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, ErrFormat
	}
	start, err = strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, 0, ErrFormat
	}
	return fields[0][0], start, nil
}

// StartTime returns the start time of pid, or 0 when it does not exist or
// is a zombie.
func StartTime(pid int) uint64 {
	state, start, err := Stat(pid)
	if err != nil || state == 'Z' {
		return 0
	}
	return start
}
