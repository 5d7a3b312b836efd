package bench

import (
	"os"
	"strconv"
	"testing"
)

// TestKernelThread checks that the leak counts leave out kernel threads
// (some kworker is always there on Linux) and keep user processes.
func TestKernelThread(t *testing.T) {
	if kernelThread(strconv.Itoa(os.Getpid())) {
		t.Error("this test process is taken for a kernel thread")
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc")
	}
	for _, e := range entries {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && len(b) > 8 && string(b[:8]) == "kworker/" {
			if !kernelThread(e.Name()) {
				t.Errorf("%s (%s) is not taken for a kernel thread", e.Name(), b)
			}
			return
		}
	}
	t.Skip("no kworker to check (not Linux, or hidden /proc)")
}
