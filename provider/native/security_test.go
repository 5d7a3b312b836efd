package native_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// The tests below are the items of the project's list of bad inputs a
// sandbox must survive that apply to the native backend.

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

// sh runs a shell command in b as uid (nil: root) and returns exit code,
// stdout and stderr.
func sh(t *testing.T, b *sandboxtest.Box, uid *uint32, command string) (int, string, string) {
	t.Helper()
	ex, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: command, UID: uid})
	if err != nil {
		t.Fatalf("run %q: %v", command, err)
	}
	return ex.ExitCode, string(ex.Stdout), string(ex.Stderr)
}

func u32(v uint32) *uint32 { return &v }

// syscallProbe calls a raw syscall with zero arguments and prints the
// return value and errno.
const syscallProbe = `python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(int(sys.argv[1]), 0, 0, 0, 0, 0, 0)
print(r, ctypes.get_errno())' `

func TestSecurityKernelSurface(t *testing.T) {
	h := newHarness(t)
	b := sandboxtest.NewBox(t, h, nil)
	denied := []struct {
		name    string
		command string
	}{
		{"mount", "mount -t tmpfs none /mnt"},
		{"bind mount", "mount --bind /tmp /mnt"},
		{"unshare user", "unshare -U true"},
		{"unshare mount", "unshare -m true"},
		{"write /proc/sys", "echo 1 > /proc/sys/kernel/panic"},
		{"write sysrq-trigger", "echo h > /proc/sysrq-trigger"},
		{"write /sys", "echo 1 > /sys/kernel/profiling"},
		{"dmesg", "dmesg"},
		{"set clock", "date -s '2001-01-01 00:00:00'"},
		{"mknod block device", "mknod /tmp/sda b 8 0"},
		{"write read-only /usr", "touch /usr/astrabox-probe"},
		{"overwrite astrabox binary", "echo x > /.astrabox/astrabox"},
		{"chmod astrabox binary", "chmod 777 /.astrabox/astrabox"},
		{"raw socket", `python3 -c 'import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, 1)'`},
		{"packet socket", `python3 -c 'import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)'`},
	}
	for _, tt := range denied {
		t.Run("denied/"+tt.name, func(t *testing.T) {
			if code, out, _ := sh(t, b, nil, tt.command); code == 0 {
				t.Fatalf("%q succeeded: %s", tt.command, out)
			}
		})
	}

	empty := []string{"/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list"}
	for _, f := range empty {
		t.Run("masked/"+f, func(t *testing.T) {
			if _, out, _ := sh(t, b, nil, "head -c 64 "+f+" 2>/dev/null | wc -c"); strings.TrimSpace(out) != "0" {
				t.Fatalf("%s readable: %s bytes", f, out)
			}
		})
	}

	// x86-64 numbers; every one must fail with EPERM (clone3: ENOSYS).
	syscalls := []struct {
		name  string
		nr    int
		errno int
	}{
		{"bpf", 321, 1}, {"perf_event_open", 298, 1}, {"userfaultfd", 323, 1}, {"io_uring_setup", 425, 1},
		{"keyctl", 250, 1}, {"add_key", 248, 1}, {"open_by_handle_at", 304, 1}, {"kexec_load", 246, 1},
		{"init_module", 175, 1}, {"finit_module", 313, 1}, {"mount", 165, 1}, {"umount2", 166, 1},
		{"unshare", 272, 1}, {"setns", 308, 1}, {"pivot_root", 155, 1}, {"fsopen", 430, 1},
		{"open_tree", 428, 1}, {"move_mount", 429, 1}, {"settimeofday", 164, 1}, {"clock_settime", 227, 1},
		{"adjtimex", 159, 1}, {"swapon", 167, 1}, {"reboot", 169, 1}, {"syslog", 103, 1}, {"clone3", 435, 38},
	}
	for _, sc := range syscalls {
		t.Run("seccomp/"+sc.name, func(t *testing.T) {
			_, out, errOut := sh(t, b, nil, syscallProbe+fmt.Sprint(sc.nr))
			if got := strings.TrimSpace(out); got != fmt.Sprintf("-1 %d", sc.errno) {
				t.Fatalf("%s: got %q (stderr %q), want -1 %d", sc.name, got, errOut, sc.errno)
			}
		})
	}

	t.Run("status of a non-root workload", func(t *testing.T) {
		_, out, _ := sh(t, b, u32(1000), "grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status")
		for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in\n%s", want, out)
			}
		}
	})

	t.Run("devices", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, "ls /dev")
		got := strings.Fields(out)
		want := []string{"fd", "full", "null", "ptmx", "pts", "random", "shm", "stderr", "stdin", "stdout", "tty", "urandom", "zero"}
		if !slices.Equal(got, want) {
			t.Fatalf("/dev holds %v, want %v", got, want)
		}
	})

	t.Run("no host files", func(t *testing.T) {
		code, out, _ := sh(t, b, nil, "test ! -e /etc/shadow && test ! -e /var/run/docker.sock && test ! -e /root/.kube && cat /proc/self/mountinfo")
		if code != 0 {
			t.Fatal("a host secret is visible")
		}
		if strings.Contains(out, h.dataDir) || strings.Contains(out, "/work") || strings.Contains(out, "/home") {
			t.Fatalf("mountinfo leaks a host path:\n%s", out)
		}
	})

	t.Run("no inherited descriptors", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, "ls /proc/self/fd; ls -l /proc/self/fd >&2")
		if got := strings.Fields(out); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			_, _, detail := sh(t, b, nil, "ls -l /proc/self/fd >&2")
			t.Fatalf("fds %v, want 0 1 2 3 (3: the listing itself):\n%s", got, detail)
		}
	})

	t.Run("network none", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		_, out, _ := sh(t, b, nil, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
		if strings.TrimSpace(out) != "lo" {
			t.Fatalf("interfaces: %q, want only lo", out)
		}
		code, _, _ := sh(t, b, nil, fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("127.0.0.1", %d), timeout=2)'`, port))
		if code == 0 {
			t.Fatal("the host's loopback service is reachable from the box")
		}
		code, _, _ = sh(t, b, nil, `python3 -c 'import socket; socket.create_connection(("169.254.169.254", 80), timeout=2)'`)
		if code == 0 {
			t.Fatal("cloud metadata is reachable")
		}
	})
}

func TestOrphansAreReaped(t *testing.T) {
	h := newHarness(t)
	b := sandboxtest.NewBox(t, h, nil)
	// 200 double-forked processes that exit at once: their zombies belong
	// to PID 1 of the box, which must reap them; a stopped daemon stays.
	sh(t, b, nil, `for i in $(seq 200); do (true &) ; done; (sleep 300 & kill -STOP $!) ; true`)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, out, _ := sh(t, b, nil, `grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
		if strings.TrimSpace(out) == "0" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s zombies are never reaped", strings.TrimSpace(out))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, out, _ := sh(t, b, nil, `grep -l '^State:.*T' /proc/[0-9]*/status | wc -l`); strings.TrimSpace(out) != "1" {
		t.Fatalf("want the one stopped daemon, got %s", out)
	}
	if err := h.Provider().Delete(ctx(t), b.ID); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, b.ID)
}

func TestSecurityIsolationBetweenBoxes(t *testing.T) {
	h := newHarness(t)
	a := sandboxtest.NewBox(t, h, nil)
	b := sandboxtest.NewBox(t, h, nil)
	sh(t, a, nil, "echo secret > /workspace/a-only; (exec -a astrabox-marker-a sleep 300) > /dev/null 2>&1 & echo started")
	if code, _, _ := sh(t, b, nil, "test -e /workspace/a-only"); code == 0 {
		t.Fatal("box b sees box a's file")
	}
	if _, out, _ := sh(t, a, nil, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'astrabox-marke[r]-a'"); strings.TrimSpace(out) != "1" {
		t.Fatalf("box a does not see its own marker process: %q", out)
	}
	_, out, _ := sh(t, b, nil, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'astrabox-marke[r]-a'")
	if strings.TrimSpace(out) != "0" {
		t.Fatal("box b sees box a's processes")
	}
	_, out, _ = sh(t, b, nil, "ls -d /proc/[0-9]* | wc -l")
	if n := strings.TrimSpace(out); n == "" || len(n) > 1 {
		t.Fatalf("box b sees %s processes; want only its own few", n)
	}
}

func TestSecurityResourceLimits(t *testing.T) {
	h := newHarness(t)
	spec := sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 64 << 20, MilliCPU: 500}}
	// Each hazard gets a box of its own, so one's aftermath cannot blur
	// another's result.
	newBox := func(t *testing.T) *sandboxtest.Box { return sandboxtest.NewBox(t, h, &spec) }

	t.Run("fork bomb", func(t *testing.T) {
		b := newBox(t)
		// The bomb backgrounds itself, so the command returns at once and
		// the bomb runs on: the pids limit must hold it, the host must stay
		// responsive, and delete must still remove everything.
		if _, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "bomb() { bomb | bomb & }; bomb"}); err != nil {
			t.Fatal(err)
		}
		pids := filepath.Join("/sys/fs/cgroup/pids", h.cgroup, b.ID, "pids.current")
		deadline := time.Now().Add(30 * time.Second)
		for {
			cur, _ := os.ReadFile(pids)
			n, _ := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
			if n > spec.Resources.PIDs {
				t.Fatalf("%d tasks in a box limited to %d", n, spec.Resources.PIDs)
			}
			if n >= spec.Resources.PIDs-2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the bomb never reached the limit (%d tasks)", n)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if out, err := exec.Command("sh", "-c", "echo host-alive").Output(); err != nil || string(out) != "host-alive\n" {
			t.Fatalf("host cannot fork during the bomb: %v", err)
		}
		start := time.Now()
		if err := h.Provider().Delete(ctx(t), b.ID); err != nil {
			t.Fatalf("delete during a fork bomb: %v", err)
		}
		t.Logf("deleted a box at its pids limit in %s", time.Since(start))
		h.CheckGone(t, b.ID)
	})

	t.Run("memory hog is OOM-killed inside", func(t *testing.T) {
		b := newBox(t)
		code, _, _ := sh(t, b, nil, `python3 -c 'b = bytearray(1 << 30)'`)
		if code != 137 {
			t.Fatalf("exit %d, want 137 (OOM kill)", code)
		}
		if code, out, _ := sh(t, b, nil, "echo alive"); code != 0 || out != "alive\n" {
			t.Fatalf("execd did not survive: %d %q", code, out)
		}
	})

	t.Run("disk fill stops at the limit", func(t *testing.T) {
		b := newBox(t)
		for _, dir := range []string{"/workspace", "/tmp"} {
			code, _, errOut := sh(t, b, nil, "head -c 200M /dev/zero > "+dir+"/fill")
			if code == 0 || !strings.Contains(errOut, "No space left") {
				t.Fatalf("%s: exit %d, stderr %q; want ENOSPC", dir, code, errOut)
			}
			sh(t, b, nil, "rm -f "+dir+"/fill")
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		b := newBox(t)
		p := h.Provider()
		if err := p.Pause(ctx(t), b.ID); err != nil {
			t.Fatal(err)
		}
		if info, err := p.Inspect(ctx(t), b.ID); err != nil || info.State != sandbox.StatePaused {
			t.Fatalf("after pause: %+v %v", info, err)
		}
		if err := p.Resume(ctx(t), b.ID); err != nil {
			t.Fatal(err)
		}
		if code, _, _ := sh(t, b, nil, "true"); code != 0 {
			t.Fatal("box does not answer after resume")
		}
	})
}

func TestOrphansAreListedAndRemoved(t *testing.T) {
	h := newHarness(t)
	p := h.Provider()
	id := sandboxtest.NewID()
	if _, err := p.Create(ctx(t), id, h.Spec()); err != nil {
		t.Fatal(err)
	}
	list, err := p.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(list, func(i sandbox.Info) bool { return i.ID == id && i.State == sandbox.StateRunning }) {
		t.Fatalf("List does not show %s running: %+v", id, list)
	}
	if err := p.Delete(ctx(t), id); err != nil {
		t.Fatal(err)
	}
	h.CheckGone(t, id)
}

func TestMetricsReportTheBoxLimits(t *testing.T) {
	h := newHarness(t)
	spec := sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 300 << 20, MilliCPU: 500}}
	b := sandboxtest.NewBox(t, h, &spec)
	m, err := b.Client.Metrics(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if m.MemTotalMiB != 300 || m.CPUCount != 0.5 || m.MemUsedMiB <= 0 || m.MemUsedMiB >= 300 {
		t.Fatalf("metrics %+v, want 300 MiB total, 0.5 CPU and some usage below the total", m)
	}
	// The box's cgroups are visible to it read-only.
	if code, _, _ := sh(t, b, nil, "echo 1 > /sys/fs/cgroup/memory/memory.limit_in_bytes"); code == 0 {
		t.Fatal("the box could change its own memory limit")
	}
}
