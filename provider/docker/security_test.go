package docker_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// The tests below are the items of the project's list of bad inputs a
// sandbox must survive that apply to the Docker backend.

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

// eventually polls cond until it holds or a minute passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for delay := time.Millisecond; !cond(); delay = min(2*delay, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(delay)
	}
}

// syscallProbe calls a raw syscall with zero arguments and prints the
// return value and errno.
const syscallProbe = `python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.syscall(int(sys.argv[1]), 0, 0, 0, 0, 0, 0)
print(r, ctypes.get_errno())' `

// connectProbe exits 0 when a TCP connection to host:port succeeds within
// two seconds.
func connectProbe(host string, port int) string {
	return fmt.Sprintf(`python3 -c 'import socket; socket.create_connection(("%s", %d), timeout=2)'`, host, port)
}

// capMask is the capability set a box's root keeps: CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP and NET_BIND_SERVICE.
const capMask = "00000000000005fb"

func TestSecurityKernelSurface(t *testing.T) {
	h := newHarness(t, nil)
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

	for _, f := range []string{"/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list"} {
		t.Run("masked/"+f, func(t *testing.T) {
			if _, out, _ := sh(t, b, nil, "head -c 64 "+f+" 2>/dev/null | wc -c"); strings.TrimSpace(out) != "0" {
				t.Fatalf("%s readable: %s bytes", f, out)
			}
		})
	}

	// x86-64 numbers; the engine's seccomp profile (or the missing
	// capability behind it) must refuse each with EPERM, or ENOSYS.
	syscalls := []struct {
		name string
		nr   int
	}{
		{"bpf", 321}, {"perf_event_open", 298}, {"userfaultfd", 323}, {"keyctl", 250}, {"add_key", 248},
		{"open_by_handle_at", 304}, {"kexec_load", 246}, {"init_module", 175}, {"finit_module", 313},
		{"mount", 165}, {"umount2", 166}, {"unshare", 272}, {"setns", 308}, {"pivot_root", 155},
		{"fsopen", 430}, {"open_tree", 428}, {"move_mount", 429}, {"settimeofday", 164},
		{"clock_settime", 227}, {"swapon", 167}, {"reboot", 169}, {"syslog", 103}, {"clone3", 435},
		{"io_uring_setup", 425},
	}
	for _, sc := range syscalls {
		t.Run("seccomp/"+sc.name, func(t *testing.T) {
			_, out, errOut := sh(t, b, nil, syscallProbe+strconv.Itoa(sc.nr))
			got := strings.TrimSpace(out)
			if got == "-1 1" || got == "-1 38" {
				return
			}
			t.Fatalf("%s: got %q (stderr %q), want -1 with EPERM or ENOSYS", sc.name, got, errOut)
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

	t.Run("status of root", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, "grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' /proc/self/status")
		for _, want := range []string{"CapEff:\t" + capMask, "CapBnd:\t" + capMask, "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in\n%s", want, out)
			}
		}
	})

	t.Run("devices", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, "find /dev -type b; for f in kvm mem kmem port kmsg sda; do test -e /dev/$f && echo /dev/$f; done; echo ---; ls /dev")
		bad, list, _ := strings.Cut(out, "---\n")
		if bad != "" {
			t.Errorf("block or kernel devices are present:\n%s", bad)
		}
		for _, want := range []string{"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts"} {
			if !slices.Contains(strings.Fields(list), want) {
				t.Errorf("/dev lacks %s: %s", want, list)
			}
		}
	})

	t.Run("no host files", func(t *testing.T) {
		code, out, _ := sh(t, b, nil, "test ! -e /var/run/docker.sock && test ! -e /run/docker.sock && test ! -e /root/.kube && cat /proc/self/mountinfo")
		if code != 0 {
			t.Fatal("a host secret is visible")
		}
		wd, err := os.Getwd() // the source tree the tests run in
		if err != nil {
			t.Fatal(err)
		}
		for _, leak := range []string{h.dataDir, filepath.Dir(h.cfg.Binary), "docker.sock", wd, "/home/"} {
			if strings.Contains(out, leak) {
				t.Fatalf("mountinfo leaks %s:\n%s", leak, out)
			}
		}
	})

	t.Run("no inherited descriptors", func(t *testing.T) {
		_, out, _ := sh(t, b, nil, "ls /proc/self/fd")
		if got := strings.Fields(out); strings.Join(got, " ") != "0 1 2 3" {
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
		_, out, _ := sh(t, b, nil, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '")
		if strings.TrimSpace(out) != "lo" {
			t.Fatalf("interfaces: %q, want only lo", out)
		}
		if code, _, _ := sh(t, b, nil, connectProbe("127.0.0.1", l.Addr().(*net.TCPAddr).Port)); code == 0 {
			t.Fatal("the host's loopback service is reachable from the box")
		}
		if code, _, _ := sh(t, b, nil, connectProbe("169.254.169.254", 80)); code == 0 {
			t.Fatal("cloud metadata is reachable")
		}
	})
}

func TestSecurityResourceLimits(t *testing.T) {
	h := newHarness(t, nil)
	spec := h.Spec()
	spec.Resources = sandbox.Resources{MemoryBytes: 256 << 20, PIDs: 64, DiskBytes: 64 << 20, MilliCPU: 500}
	newBox := func(t *testing.T) *sandboxtest.Box { return sandboxtest.NewBox(t, h, &spec) }

	t.Run("fork bomb", func(t *testing.T) {
		b := newBox(t)
		pids := h.cgroupFile(t, b.ID, "pids", "pids.current")
		if _, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "bomb() { bomb | bomb & }; bomb"}); err != nil {
			t.Fatal(err)
		}
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
		if err := h.p.Delete(ctx(t), b.ID); err != nil {
			t.Fatalf("delete during a fork bomb: %v", err)
		}
		h.CheckGone(t, b.ID)
	})

	t.Run("memory hog is OOM-killed inside", func(t *testing.T) {
		b := newBox(t)
		for _, hog := range []string{`python3 -c 'b = bytearray(1 << 30)'`, `head -c 400M /dev/zero > /dev/shm/fill; python3 -c 'b = bytearray(300 << 20)'`} {
			code, _, errOut := sh(t, b, nil, hog)
			if code != 137 && !strings.Contains(errOut, "No space left") {
				t.Fatalf("%s: exit %d (%q), want 137 (OOM kill) or ENOSPC", hog, code, errOut)
			}
			sh(t, b, nil, "rm -f /dev/shm/fill")
			if code, out, _ := sh(t, b, nil, "echo alive"); code != 0 || out != "alive\n" {
				t.Fatalf("execd did not survive: %d %q", code, out)
			}
		}
		if info, err := h.p.Inspect(ctx(t), b.ID); err != nil || info.State != sandbox.StateRunning {
			t.Fatalf("after the OOM kill: %+v %v", info, err)
		}
	})

	t.Run("disk fill stops at the limit", func(t *testing.T) {
		b := newBox(t)
		for _, dir := range []string{"/workspace", "/tmp"} {
			code, _, errOut := sh(t, b, nil, "head -c 200M /dev/zero > "+dir+"/fill")
			if code == 0 || !strings.Contains(errOut, "No space left") {
				t.Fatalf("%s: exit %d, stderr %q; want ENOSPC", dir, code, errOut)
			}
			code, _, errOut = sh(t, b, nil, "cd "+dir+" && rm -f fill && mkdir many && for i in $(seq 100000); do : > many/$i || exit 1; done")
			if code == 0 {
				t.Fatalf("%s: 100000 files fit in a 64 MiB file system", dir)
			}
			if !strings.Contains(errOut, "No space left") {
				t.Fatalf("%s: many files failed with %q; want ENOSPC", dir, errOut)
			}
			sh(t, b, nil, "rm -rf "+dir+"/fill "+dir+"/many")
		}
	})

	t.Run("metrics report the limits", func(t *testing.T) {
		b := newBox(t)
		m, err := b.Client.Metrics(ctx(t))
		if err != nil {
			t.Fatal(err)
		}
		if m.MemTotalMiB != 256 || m.CPUCount != 0.5 || m.MemUsedMiB <= 0 || m.MemUsedMiB >= 256 {
			t.Fatalf("metrics %+v, want 256 MiB total, 0.5 CPU and some usage below the total", m)
		}
	})

	t.Run("pause and resume", func(t *testing.T) {
		b := newBox(t)
		for range 2 { // the second pause and resume are no-ops
			if err := h.p.Pause(ctx(t), b.ID); err != nil {
				t.Fatal(err)
			}
		}
		if info, err := h.p.Inspect(ctx(t), b.ID); err != nil || info.State != sandbox.StatePaused {
			t.Fatalf("after pause: %+v %v", info, err)
		}
		for range 2 {
			if err := h.p.Resume(ctx(t), b.ID); err != nil {
				t.Fatal(err)
			}
		}
		if code, _, _ := sh(t, b, nil, "true"); code != 0 {
			t.Fatal("box does not answer after resume")
		}
	})
}

// cgroupFile is the host path of file in controller's cgroup of box id
// (cgroup v1, or the unified hierarchy when controller is absent).
func (h *harness) cgroupFile(t *testing.T, id, controller, file string) string {
	t.Helper()
	pid := h.containerOf(t, id).Container.State.Pid
	f, err := os.Open(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	unified := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == controller {
				return filepath.Join("/sys/fs/cgroup", controller, parts[2], file)
			}
		}
		if parts[0] == "0" {
			unified = parts[2]
		}
	}
	return filepath.Join("/sys/fs/cgroup", unified, file)
}

func TestSecurityReadonlyRootfs(t *testing.T) {
	h := newHarness(t, func(c *docker.Config) { c.ReadonlyRootfs = true })
	if !slices.Contains(h.p.Capabilities().Limits, sandbox.ResourceDisk) {
		t.Fatal("a read-only root does not claim the disk limit")
	}
	b := sandboxtest.NewBox(t, h, nil)
	for _, path := range []string{"/usr/probe", "/probe", "/etc/probe", "/root/probe"} {
		if code, _, errOut := sh(t, b, nil, "touch "+path); code == 0 || !strings.Contains(errOut, "Read-only file system") {
			t.Errorf("touch %s: exit %d %q, want EROFS", path, code, errOut)
		}
	}
	for _, dir := range []string{"/workspace", "/tmp", "/var/tmp", "/run", "/dev/shm"} {
		if code, _, errOut := sh(t, b, nil, "echo x > "+dir+"/probe"); code != 0 {
			t.Errorf("%s is not writable: %s", dir, errOut)
		}
	}
}

func TestSecurityIsolationBetweenBoxes(t *testing.T) {
	h := newHarness(t, nil)
	a := sandboxtest.NewBox(t, h, nil)
	b := sandboxtest.NewBox(t, h, nil)
	sh(t, a, nil, "echo secret > /workspace/a-only; (exec -a astrabox-marker-a sleep 300) > /dev/null 2>&1 & echo started")
	if code, _, _ := sh(t, b, nil, "test -e /workspace/a-only"); code == 0 {
		t.Fatal("box b sees box a's file")
	}
	if _, out, _ := sh(t, a, nil, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'astrabox-marke[r]-a'"); strings.TrimSpace(out) != "1" {
		t.Fatalf("box a does not see its own marker process: %q", out)
	}
	if _, out, _ := sh(t, b, nil, "cat /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' ' ' | grep -c 'astrabox-marke[r]-a'"); strings.TrimSpace(out) != "0" {
		t.Fatal("box b sees box a's processes")
	}
}

func TestOrphansAreReaped(t *testing.T) {
	h := newHarness(t, nil)
	b := sandboxtest.NewBox(t, h, nil)
	// 200 double-forked processes that exit at once: their zombies belong
	// to PID 1 of the box (Docker's init), which must reap them.
	sh(t, b, nil, `for i in $(seq 200); do (true &) ; done; true`)
	eventually(t, "zombies to be reaped", func() bool {
		_, out, _ := sh(t, b, nil, `grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l`)
		return strings.TrimSpace(out) == "0"
	})
}

func TestSecurityUnrestrictedNetwork(t *testing.T) {
	h := newHarness(t, nil)
	testenv.Need(t, h.p.Capabilities().Has(sandbox.CapNetworkUnrestricted), "iptables (network unrestricted)")
	spec := h.Spec()
	spec.Network.Mode = sandbox.NetworkUnrestricted
	a := sandboxtest.NewBox(t, h, &spec)
	b := sandboxtest.NewBox(t, h, &spec)

	if _, out, _ := sh(t, a, nil, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"); out != "eth0 lo " {
		t.Fatalf("interfaces %q, want eth0 and lo", out)
	}
	// b serves on port 8000; the host reaches it (replies to connections
	// the host opens pass), box a does not.
	if _, err := b.Client.Run(ctx(t), wire.RunCommandRequest{Command: "exec python3 -m http.server 8000", Background: true}); err != nil {
		t.Fatal(err)
	}
	_, bIP, _ := sh(t, b, nil, "hostname -i | cut -d' ' -f1")
	bIP = strings.TrimSpace(bIP)
	eventually(t, "the host to reach box b's server", func() bool {
		c, err := net.DialTimeout("tcp", net.JoinHostPort(bIP, "8000"), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	if code, _, _ := sh(t, a, nil, connectProbe(bIP, 8000)); code == 0 {
		t.Error("box a reaches box b")
	}

	// A service on every host address is out of reach.
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := l.Addr().(*net.TCPAddr).Port
	addrs, _ := net.InterfaceAddrs()
	for _, a4 := range addrs {
		ipn, ok := a4.(*net.IPNet)
		if !ok || ipn.IP.To4() == nil || ipn.IP.IsLoopback() {
			continue
		}
		if code, _, _ := sh(t, a, nil, connectProbe(ipn.IP.String(), port)); code == 0 {
			t.Errorf("box reaches the host at %s", ipn.IP)
		}
	}

	// Metadata: the connection fails and the host's rule refused it.
	before := rejectCount(t, h, "169.254.0.0/16")
	if code, _, _ := sh(t, a, nil, connectProbe("169.254.169.254", 80)); code == 0 {
		t.Fatal("cloud metadata is reachable")
	}
	if after := rejectCount(t, h, "169.254.0.0/16"); after <= before {
		t.Fatalf("no packet to the metadata address met the host's rule (%d, then %d)", before, after)
	}
}

// rejectCount is the packet count of the host rule that refuses traffic
// from the backend's bridge to dst.
func rejectCount(t *testing.T, h *harness, dst string) int {
	t.Helper()
	out, err := exec.Command("iptables", "-w", "-S", "DOCKER-USER").Output()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-i ` + h.p.NetworkBridge() + ` -j (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no jump for bridge %s in DOCKER-USER:\n%s", h.p.NetworkBridge(), out)
	}
	out, err = exec.Command("iptables", "-w", "-L", string(m[1]), "-v", "-n", "-x").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) > 8 && f[2] == "REJECT" && f[8] == dst {
			n, _ := strconv.Atoi(f[0])
			return n
		}
	}
	t.Fatalf("no REJECT rule for %s in %s:\n%s", dst, m[1], out)
	return 0
}
