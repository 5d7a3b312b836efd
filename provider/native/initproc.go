package native

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// RunInit is `astrabox init`: PID 1 of a native box. It waits until the
// host has placed it in its cgroups, builds the root file system, brings up
// loopback, drops privileges for everything it starts (capability bounding
// set, no_new_privs, seccomp), starts execd on the listener the host
// passed, then the entrypoint, and reaps every process until execd exits
// or it is told to stop. Errors before execd starts are written to stderr,
// which the host keeps in the box's log.
func RunInit(stderr io.Writer) int {
	if err := runInit(); err != nil {
		fmt.Fprintf(stderr, "astrabox init: %v\n", err)
		return 1
	}
	return 0
}

func runInit() error {
	runtime.LockOSThread()
	// Descriptors inherited from the host reach nothing else in the box
	// but the ones handed on explicitly.
	closeOnExecFrom(3)
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
	if err := loadSeccomp(); err != nil {
		return err
	}
	return supervise(&cfg)
}

// supervise starts execd and the entrypoint and reaps until execd exits or
// SIGTERM arrives (then every process gets SIGTERM, and SIGKILL after 5 s).
func supervise(cfg *initConfig) error {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)

	execdArgs := []string{"astrabox", "execd", "--listen", ":44772", "--listen-fd", "3",
		"--access-token-fd", "4", "--workdir", boxWorkspace, "--log-level", "warn"}
	execd, err := startChild(boxBinary, execdArgs, cfg.Env, []*os.File{os.NewFile(fdListener, "listener"), os.NewFile(fdToken, "token")})
	if err != nil {
		return fmt.Errorf("start execd: %w", err)
	}
	os.NewFile(fdListener, "listener").Close()
	os.NewFile(fdToken, "token").Close()
	if len(cfg.Entrypoint) > 0 {
		path := cfg.Entrypoint[0]
		if !strings.Contains(path, "/") {
			path = lookPath(path, cfg.Env)
		}
		if _, err := startChild(path, cfg.Entrypoint, cfg.Env, nil); err != nil {
			fmt.Fprintf(os.Stderr, "astrabox init: start entrypoint: %v\n", err)
		}
	}
	stopping := false
	var killAt <-chan time.Time
	for {
		select {
		case sig := <-signals:
			if sig != syscall.SIGCHLD && !stopping {
				stopping = true
				_ = unix.Kill(-1, syscall.SIGTERM)
				killAt = time.After(5 * time.Second)
			}
		case <-killAt:
			_ = unix.Kill(-1, syscall.SIGKILL)
		}
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if pid <= 0 || err != nil {
				if errors.Is(err, unix.ECHILD) && stopping {
					return nil
				}
				break
			}
			if pid == execd {
				if !stopping {
					fmt.Fprintf(os.Stderr, "astrabox init: execd exited (%v)\n", ws)
					stopping = true
					_ = unix.Kill(-1, syscall.SIGTERM)
					killAt = time.After(5 * time.Second)
				}
			}
		}
	}
}

// startChild starts path with the given files as fds 3, 4, ... and returns
// its pid; init reaps it.
func startChild(path string, args, env []string, files []*os.File) (int, error) {
	attr := &os.ProcAttr{Dir: boxWorkspace, Env: env, Files: append([]*os.File{os.Stdin, os.Stderr, os.Stderr}, files...),
		Sys: &syscall.SysProcAttr{Setsid: true}}
	p, err := os.StartProcess(path, args, attr)
	if err != nil {
		return 0, err
	}
	pid := p.Pid
	_ = p.Release()
	return pid, nil
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

// boxCapabilities are what root in a box keeps (within its user namespace):
// Docker's default set without NET_RAW and MKNOD.
var boxCapabilities = []uintptr{
	unix.CAP_CHOWN, unix.CAP_DAC_OVERRIDE, unix.CAP_FOWNER, unix.CAP_FSETID, unix.CAP_KILL,
	unix.CAP_SETGID, unix.CAP_SETUID, unix.CAP_SETPCAP, unix.CAP_NET_BIND_SERVICE,
	unix.CAP_SYS_CHROOT, unix.CAP_AUDIT_WRITE, unix.CAP_SETFCAP,
}

// dropBoundingSet removes every other capability from the bounding set, so
// no process of the box can ever hold it.
func dropBoundingSet() error {
	keep := map[uintptr]bool{}
	for _, c := range boxCapabilities {
		keep[c] = true
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if keep[c] {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}
