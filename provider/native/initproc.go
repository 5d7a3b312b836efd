package native

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/astrabox/astrabox/egress/trust"
	"golang.org/x/sys/unix"
)

// Daemon is what init serves in its own process once the box is built:
// execd. Running it in PID 1 rather than as a second process saves a
// process start per box and its memory.
type Daemon struct {
	// Serve serves execd on l (and on TCP port 44772 in the box) with the
	// access token and the box's environment until ctx ends.
	Serve func(ctx context.Context, l net.Listener, token string, env []string) error
	// ReapOrphans reaps exited children that Serve did not start itself.
	ReapOrphans func()
	// Children counts the children of this process.
	Children func() int
}

// RunInit is `astrabox init`: PID 1 of a native box. It waits until the
// host has placed it in its cgroups, builds the root file system, brings up
// loopback, drops privileges (capability bounding set and its own
// capabilities, no_new_privs, seccomp), serves d on the listener the host
// passed, starts the entrypoint, and reaps orphans until d stops or it is
// told to stop, or the box's deadline passes. Errors are written to
// stderr: like everything init and the entrypoint print, through a pipe
// into the box's output log (see initoutput.go).
func RunInit(stderr io.Writer, d Daemon) int {
	runtime.LockOSThread()
	// Descriptors inherited from the host reach nothing else in the box
	// but the ones handed on explicitly.
	closeOnExecFrom(3)
	out, err := startOutput()
	if err == nil {
		err = runInit(out, d)
	}
	code := 0
	if err != nil {
		fmt.Fprintf(stderr, "astrabox init: %v\n", err)
		code = 1
	}
	if out != nil {
		out.close()
	}
	return code
}

func runInit(out *initOutput, d Daemon) error {
	cfgFile := os.NewFile(fdConfig, "config")
	var cfg initConfig
	if err := json.NewDecoder(cfgFile).Decode(&cfg); err != nil {
		return fmt.Errorf("read config: %w", err)
	}
	cfgFile.Close()
	sync := os.NewFile(fdSync, "sync")
	var b [1]byte
	if _, err := io.ReadFull(sync, b[:]); err != nil {
		return fmt.Errorf("wait for the host: %w", err)
	}
	sync.Close()
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return fmt.Errorf("unshare cgroup namespace: %w", err)
	}
	if err := unix.Sethostname([]byte(cfg.Hostname)); err != nil {
		return fmt.Errorf("set hostname: %w", err)
	}
	if err := buildRoot(&cfg); err != nil {
		return err
	}
	if err := loopbackUp(); err != nil {
		return err
	}
	if err := setRlimits(); err != nil {
		return err
	}
	if err := dropBoundingSet(); err != nil {
		return err
	}
	// Nothing in the box may ptrace or read the memory of init.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("set non-dumpable: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return err
	}
	if err := loadSeccomp(); err != nil {
		return err
	}
	return supervise(&cfg, d, out, initDeadline{os.NewFile(fdDeadline, "deadline")})
}

// supervise serves d and starts the entrypoint (its output into out),
// then reaps orphans until d stops or SIGTERM arrives (then every process
// gets SIGTERM, and SIGKILL after 5 s) or the deadline passes (then every
// process gets SIGKILL at once).
func supervise(cfg *initConfig, d Daemon, out *initOutput, deadline initDeadline) error {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	tokFile := os.NewFile(fdToken, "token")
	tok, err := io.ReadAll(io.LimitReader(tokFile, 4096))
	tokFile.Close()
	if err != nil {
		return fmt.Errorf("read execd token: %w", err)
	}
	lf := os.NewFile(fdListener, "listener")
	l, err := net.FileListener(lf)
	lf.Close()
	if err != nil {
		return fmt.Errorf("execd listener: %w", err)
	}
	if len(cfg.TrustCA) > 0 {
		// Before execd answers, so that the box is Running only with it.
		if err := trust.Write(cfg.TrustCA); err != nil {
			return fmt.Errorf("install the egress CA: %w", err)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() { served <- d.Serve(ctx, l, strings.TrimSpace(string(tok)), cfg.Env) }()

	if len(cfg.Entrypoint) > 0 {
		path := cfg.Entrypoint[0]
		if !strings.Contains(path, "/") {
			path = lookPath(path, cfg.Env)
		}
		if err := startEntrypoint(path, cfg.Entrypoint, cfg.Env, out); err != nil {
			fmt.Fprintf(os.Stderr, "astrabox init: start entrypoint: %v\n", err)
		}
	}
	stopping := false
	serving := true
	var killAt <-chan time.Time
	beginStop := func() {
		if !stopping {
			stopping = true
			stop()
			_ = unix.Kill(-1, syscall.SIGTERM)
			killAt = time.After(5 * time.Second)
		}
	}
	expire := func(at time.Time) {
		fmt.Fprintf(os.Stderr, "astrabox init: the box's deadline %s has passed: killing every process\n", at.UTC().Format(time.RFC3339))
		beginStop()
		_ = unix.Kill(-1, syscall.SIGKILL)
	}
	expired := false
	// The ticks reap even if a SIGCHLD was coalesced, and read the deadline.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case sig := <-signals:
			if sig != syscall.SIGCHLD {
				beginStop()
			}
		case err := <-served:
			serving = false
			if !stopping {
				fmt.Fprintf(os.Stderr, "astrabox init: execd stopped: %v\n", err)
			}
			beginStop()
		case <-killAt:
			_ = unix.Kill(-1, syscall.SIGKILL)
		case now := <-tick.C:
			if at, passed := deadline.passed(now); passed && !expired {
				expired = true
				expire(at)
			}
		}
		d.ReapOrphans()
		if stopping && !serving && d.Children() == 0 {
			return nil
		}
	}
}

// startEntrypoint starts path, its stdout and stderr a pipe into out; init
// reaps it.
func startEntrypoint(path string, args, env []string, out *initOutput) error {
	w, err := out.entrypointPipe()
	if err != nil {
		return err
	}
	defer w.Close()
	attr := &os.ProcAttr{Dir: boxWorkspace, Env: env, Files: []*os.File{os.Stdin, w, w},
		Sys: &syscall.SysProcAttr{Setsid: true}}
	p, err := os.StartProcess(path, args, attr)
	if err != nil {
		return err
	}
	_ = p.Release()
	return nil
}

func lookPath(name string, env []string) string {
	path := "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range strings.Split(path, ":") {
		p := dir + "/" + name
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	return name
}

// closeOnExecFrom marks every open descriptor >= min close-on-exec.
func closeOnExecFrom(min int) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd >= min {
			unix.CloseOnExec(fd)
		}
	}
}

// loopbackUp brings up lo in the box's network namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("loopback socket: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get lo flags: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("bring lo up: %w", err)
	}
	return nil
}

// setRlimits sets the per-process limits of the box: no core dumps, and
// up to 65536 open files (as far as the host's hard limit allows; raising
// a hard limit needs a privilege the box does not have).
func setRlimits() error {
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("setrlimit core: %w", err)
	}
	var nofile unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		return fmt.Errorf("getrlimit nofile: %w", err)
	}
	nofile.Cur = min(65536, nofile.Max)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &nofile); err != nil {
		return fmt.Errorf("setrlimit nofile: %w", err)
	}
	return nil
}

// dropCapabilities reduces init's own capabilities, on every thread, to
// the box set: once the box is built, PID 1 (which serves execd) needs no
// more than its root workloads have.
func dropCapabilities() error {
	var mask [2]uint32
	for _, c := range boxCapabilities {
		mask[c/32] |= 1 << (c % 32)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: mask[0], Permitted: mask[0]},
		{Effective: mask[1], Permitted: mask[1]},
	}
	if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return fmt.Errorf("drop capabilities: %w", errno)
	}
	return nil
}

// boxCapabilities are what root in a box keeps (within its user namespace):
// Docker's default set without NET_RAW and MKNOD.
var boxCapabilities = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE, unix.CAP_SETFCAP,
}

// dropBoundingSet removes every other capability from the bounding set of
// every thread of init, so no process of the box can ever hold it: the
// bounding set is per thread and inherited at fork, and execd forks
// commands from whichever thread its goroutine runs on.
func dropBoundingSet() error {
	keep := map[uintptr]bool{}
	for _, c := range boxCapabilities {
		keep[c] = true
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		if _, _, errno := syscall.AllThreadsSyscall(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, c, 0); errno != 0 && errno != unix.EINVAL {
			return fmt.Errorf("drop capability %d: %w", c, errno)
		}
	}
	return nil
}
