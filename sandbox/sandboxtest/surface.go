package sandboxtest

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/astrabox/astrabox/sandbox"
)

// syscallProbe calls the raw syscall numbered by its argument with zero
// arguments and prints the return value and errno.
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

// baselineDenied must fail in a box of every isolating backend, as root.
var baselineDenied = []Probe{
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

// Errnos of refused syscalls.
const (
	eperm  = 1
	enosys = 38
)

// baselineSyscalls are refused in every isolating backend's box (x86-64
// numbers). Under container isolation the host kernel's seccomp filter and
// capability checks answer, so each fails with exactly its errno: EPERM,
// or ENOSYS for clone3 so that libc falls back to clone. A kernel of the
// backend's own (sandboxed or VM isolation) may answer either.
var baselineSyscalls = []Syscall{
	{"bpf", 321, eperm}, {"perf_event_open", 298, eperm}, {"userfaultfd", 323, eperm},
	{"io_uring_setup", 425, eperm}, {"keyctl", 250, eperm}, {"add_key", 248, eperm},
	{"open_by_handle_at", 304, eperm}, {"kexec_load", 246, eperm}, {"init_module", 175, eperm},
	{"finit_module", 313, eperm}, {"mount", 165, eperm}, {"umount2", 166, eperm},
	{"unshare", 272, eperm}, {"setns", 308, eperm}, {"pivot_root", 155, eperm},
	{"fsopen", 430, eperm}, {"open_tree", 428, eperm}, {"move_mount", 429, eperm},
	{"settimeofday", 164, eperm}, {"clock_settime", 227, eperm}, {"swapon", 167, eperm},
	{"reboot", 169, eperm}, {"syslog", 103, eperm}, {"clone3", 435, enosys},
}

// testKernelSurface checks what a box's root can reach of the host kernel
// and the host: the baseline every isolating backend meets, then the
// harness's Hardening. Each subtest gets a fresh box.
func testKernelSurface(t *testing.T, h Harness) {
	isolating(t, h)
	var hd Hardening
	if x, ok := h.(Hardened); ok {
		hd = x.Hardening()
	}
	caps := h.Provider().Capabilities()

	t.Run("Denied", func(t *testing.T) {
		b := NewBox(t, h, nil)
		for _, pr := range slices.Concat(baselineDenied, hd.Denied) {
			t.Run(pr.Name, func(t *testing.T) {
				if code, out, _ := shell(t, b, nil, pr.Command); code == 0 {
					t.Fatalf("%q succeeded: %s", pr.Command, out)
				}
			})
		}
	})

	t.Run("Masked", func(t *testing.T) {
		b := NewBox(t, h, nil)
		for _, f := range []string{"/proc/kcore", "/proc/kallsyms", "/proc/keys", "/proc/timer_list"} {
			t.Run(f, func(t *testing.T) {
				if _, out, _ := shell(t, b, nil, "head -c 64 "+f+" 2>/dev/null | wc -c"); strings.TrimSpace(out) != "0" {
					t.Fatalf("%s readable: %s bytes", f, out)
				}
			})
		}
	})

	t.Run("Seccomp", func(t *testing.T) {
		if runtime.GOARCH != "amd64" {
			t.Skipf("the syscall numbers are x86-64's, not %s's", runtime.GOARCH)
		}
		b := NewBox(t, h, nil)
		exact := caps.Isolation == sandbox.IsolationContainer
		check := func(t *testing.T, sc Syscall, exact bool) {
			_, out, errOut := shell(t, b, nil, syscallProbe+fmt.Sprint(sc.Nr))
			got := strings.TrimSpace(out)
			if got == fmt.Sprintf("-1 %d", sc.Errno) || !exact && (got == "-1 1" || got == "-1 38") {
				return
			}
			t.Fatalf("%s: got %q (stderr %q), want -1 %d", sc.Name, got, errOut, sc.Errno)
		}
		for _, sc := range baselineSyscalls {
			t.Run(sc.Name, func(t *testing.T) { check(t, sc, exact) })
		}
		for _, sc := range hd.Syscalls {
			t.Run(sc.Name, func(t *testing.T) { check(t, sc, true) })
		}
	})

	t.Run("NonRootStatus", func(t *testing.T) {
		b := NewBox(t, h, nil)
		_, out, _ := shell(t, b, uidPtr(1000), "grep -E '^(CapEff|CapBnd|CapPrm|NoNewPrivs|Seccomp):' /proc/self/status")
		for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "CapPrm:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
			if !strings.Contains(out, want) {
				t.Errorf("missing %q in\n%s", want, out)
			}
		}
	})

	t.Run("RootStatus", func(t *testing.T) {
		b := NewBox(t, h, nil)
		_, out, _ := shell(t, b, nil, "cat /proc/self/status")
		lines := strings.Split(out, "\n")
		for _, want := range slices.Concat([]string{"NoNewPrivs:\t1", "Seccomp:\t2"}, hd.RootStatus) {
			if !slices.Contains(lines, want) {
				t.Errorf("missing %q in\n%s", want, out)
			}
		}
	})

	t.Run("Devices", func(t *testing.T) {
		b := NewBox(t, h, nil)
		_, out, _ := shell(t, b, nil, "find /dev -type b; for f in kvm mem kmem port kmsg sda; do test -e /dev/$f && echo /dev/$f; done; echo ---; ls /dev")
		bad, list, _ := strings.Cut(out, "---\n")
		if bad != "" {
			t.Errorf("block or kernel devices are present:\n%s", bad)
		}
		got := strings.Fields(list)
		for _, want := range []string{"null", "zero", "full", "random", "urandom", "tty", "ptmx", "pts"} {
			if !slices.Contains(got, want) {
				t.Errorf("/dev lacks %s: %v", want, got)
			}
		}
		if hd.Devices != nil && !slices.Equal(got, hd.Devices) {
			t.Errorf("/dev holds %v, want exactly %v", got, hd.Devices)
		}
	})

	t.Run("NoHostFiles", func(t *testing.T) {
		b := NewBox(t, h, nil)
		for _, f := range []string{"/var/run/docker.sock", "/run/docker.sock", "/root/.kube"} {
			if code, _, _ := shell(t, b, nil, "test -e "+f); code == 0 {
				t.Errorf("the host's %s is visible in the box", f)
			}
		}
		wd, err := os.Getwd() // the source tree the tests run in
		if err != nil {
			t.Fatal(err)
		}
		_, out, _ := shell(t, b, nil, "cat /proc/self/mountinfo")
		for _, leak := range slices.Concat([]string{wd, "docker.sock", "/home/"}, hd.HostPaths) {
			if leak != "" && strings.Contains(out, leak) {
				t.Errorf("mountinfo leaks %s:\n%s", leak, out)
			}
		}
	})

	t.Run("NoInheritedDescriptors", func(t *testing.T) {
		b := NewBox(t, h, nil)
		_, out, _ := shell(t, b, nil, "ls /proc/self/fd")
		if got := strings.Fields(out); !slices.Equal(got, []string{"0", "1", "2", "3"}) {
			_, _, detail := shell(t, b, nil, "ls -l /proc/self/fd >&2")
			t.Fatalf("fds %v, want 0 1 2 3 (3: the listing itself):\n%s", got, detail)
		}
	})

	t.Run("NetworkNone", func(t *testing.T) {
		if !slices.Contains(caps.NetworkModes, sandbox.NetworkNone) {
			t.Skipf("backend %s offers no network mode none", h.Provider().Name())
		}
		spec := h.Spec()
		spec.Network = sandbox.NetworkPolicy{Mode: sandbox.NetworkNone}
		b := NewBox(t, h, &spec)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if _, out, _ := shell(t, b, nil, "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '"); strings.TrimSpace(out) != "lo" {
			t.Fatalf("interfaces: %q, want only lo", out)
		}
		if code, _, _ := shell(t, b, nil, connectProbe("127.0.0.1", l.Addr().(*net.TCPAddr).Port)); code == 0 {
			t.Fatal("the host's loopback service is reachable from the box")
		}
		if code, _, _ := shell(t, b, nil, connectProbe("169.254.169.254", 80)); code == 0 {
			t.Fatal("cloud metadata is reachable")
		}
	})
}
