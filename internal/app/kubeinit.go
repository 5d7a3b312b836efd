package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/vishvananda/netlink"
)

// runKubeInit is the init container of a Kubernetes box (provider/kubernetes):
// it installs this binary where the box container runs it as execd and,
// for network none, removes every interface but loopback from the pod's
// network namespace, which the box then shares. It runs before anything
// of the box, from the execd image that holds only this binary.
func runKubeInit(_ context.Context, args []string, stdio IO, _ Env) error {
	fs := flag.NewFlagSet("kube-init", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	install := fs.String("install", "", "copy this binary to this path (mode 0555)")
	dropNetwork := fs.Bool("drop-network", false, "delete every network interface but loopback (needs CAP_NET_ADMIN)")
	run := fs.Bool("exec", false, "be PID 1 of the box container: run the command after -- as a child, reap orphans, forward signals")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *run {
		if fs.NArg() == 0 {
			return errors.New("kube-init --exec needs the command to run")
		}
		code, err := reapAndWait(fs.Args())
		if err != nil {
			return err
		}
		if code != 0 {
			return exitCode(code)
		}
		return nil
	}
	if fs.NArg() > 0 || (*install == "" && !*dropNetwork) {
		return errors.New("usage: astrabox kube-init [--install PATH] [--drop-network] | --exec -- CMD ARGS")
	}
	if *install != "" {
		if err := installSelf(*install); err != nil {
			return err
		}
	}
	if *dropNetwork {
		if err := dropLinks(); err != nil {
			return err
		}
	}
	return nil
}

// reapAndWait starts argv as a child in this process's session and
// process group, forwards SIGTERM, SIGINT and SIGHUP to it, and reaps
// every process that is reparented here, as docker-init does for a Docker
// box: orphans of the box then keep a parent in their session, so a
// stopped daemon is not sent SIGHUP as an orphaned process group's member
// would be. It returns the child's exit code (128+n for signal n).
func reapAndWait(argv []string) (int, error) {
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, syscall.SIGCHLD, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{Env: os.Environ(), Files: []*os.File{os.Stdin, os.Stdout, os.Stderr}})
	if err != nil {
		return 0, fmt.Errorf("start %s: %w", argv[0], err)
	}
	for s := range sigs {
		if s != syscall.SIGCHLD {
			_ = proc.Signal(s)
			continue
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
			if pid == proc.Pid {
				if ws.Signaled() {
					return 128 + int(ws.Signal()), nil
				}
				return ws.ExitStatus(), nil
			}
		}
	}
	return 0, nil
}

// installSelf copies the running executable to path, through a temporary
// file renamed into place.
func installSelf(path string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("locate this binary: %w", err)
	}
	src, err := os.Open(exe)
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer src.Close()
	tmp, err := os.CreateTemp(filepath.Dir(path), ".install-*")
	if err != nil {
		return fmt.Errorf("install: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, src); err != nil {
		tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Chmod(0o555); err != nil {
		tmp.Close()
		return fmt.Errorf("install: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("install: %w", err)
	}
	return nil
}

// dropLinks deletes every link of this network namespace but loopback,
// and fails when one remains.
func dropLinks() error {
	links, err := netlink.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if l.Attrs().Name == "lo" {
			continue
		}
		if err := netlink.LinkDel(l); err != nil {
			return fmt.Errorf("delete link %s: %w", l.Attrs().Name, err)
		}
	}
	if links, err = netlink.LinkList(); err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	for _, l := range links {
		if l.Attrs().Name != "lo" {
			return fmt.Errorf("link %s remains", l.Attrs().Name)
		}
	}
	return nil
}
