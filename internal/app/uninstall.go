package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
)

// serveLock is the file in a data dir that a running `astrabox serve`
// holds a shared flock on, and `astrabox uninstall` an exclusive one.
const serveLock = "serve.lock"

// dataDirMarks are entries only an AstraBox data dir has: uninstall
// refuses a directory with none of them (a mistyped path).
var dataDirMarks = []string{serveLock, "astrabox.db", "master.key", "api-key.sha256", "native", "docker"}

// uninstallBackends are the backends whose boxes live on this host under
// the data dir, in the order uninstall removes them.
var uninstallBackends = []string{"native", "docker"}

// lockDataDir takes the flock of dir's serveLock without waiting: shared
// for a server (several may hold it), exclusive for uninstall. The
// returned func releases it. A lock another process holds is an error
// saying who: a server (for uninstall) or an uninstall (for a server).
func lockDataDir(dir string, exclusive bool) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, serveLock), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock data dir: %w", err)
	}
	how := unix.LOCK_SH
	if exclusive {
		how = unix.LOCK_EX
	}
	for {
		err = unix.Flock(int(f.Fd()), how|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		switch {
		case !errors.Is(err, unix.EWOULDBLOCK):
			return nil, fmt.Errorf("lock data dir: %w", err)
		case exclusive:
			return nil, fmt.Errorf("data dir %s is in use: an astrabox serve (or another uninstall) holds %s; stop it first", dir, serveLock)
		default:
			return nil, fmt.Errorf("data dir %s is being uninstalled (astrabox uninstall holds %s)", dir, serveLock)
		}
	}
	return func() { f.Close() }, nil
}

// runUninstall is `astrabox uninstall --data-dir DIR [--config FILE]
// [--yes]`: it removes everything of a data dir, for a server that never
// comes back. It refuses while a server holds the data dir (serveLock)
// and, without --yes, prints what it would remove and exits 1. With
// --yes it opens the native and docker backends on the data dir as serve
// does (with the config file's sections of them), deletes every box each
// lists (expired, paused and failed ones too), and for the native
// backend and a docker backend of the data dir's own owner also their
// named volumes and snapshots; then it closes the backends, which
// releases their mounts, cgroups, networks and host firewall rules, and
// removes the data dir. Anything that fails leaves the data dir in
// place, so that running it again finishes the job; nothing is removed
// while a mount remains under the data dir.
func runUninstall(ctx context.Context, args []string, stdio IO, env Env) error {
	fs := flag.NewFlagSet("uninstall", flag.ContinueOnError)
	fs.SetOutput(stdio.Stderr)
	dataDir := fs.String("data-dir", "", "the data dir to remove, as serve was given it (required)")
	configPath := fs.String("config", "", "the JSON config file serve ran with (its native, docker and volumes sections)")
	yes := fs.Bool("yes", false, "remove; without it, only print what would be removed")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 0 || *dataDir == "" {
		return errors.New("usage: astrabox uninstall --data-dir DIR [--config FILE] [--yes]")
	}
	log, err := newLogger(stdio.Stderr, *logLevel)
	if err != nil {
		return err
	}
	var cfg serveConfig
	if *configPath != "" {
		b, err := os.ReadFile(*configPath)
		if err != nil {
			return fmt.Errorf("read config: %w", err)
		}
		if err := decodeConfig(b, &cfg); err != nil {
			return fmt.Errorf("config %s: %w", *configPath, err)
		}
	}
	dir, err := filepath.Abs(*dataDir)
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(stdio.Stdout, "nothing to remove: %s does not exist\n", dir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	if !slices.ContainsFunc(entries, func(e os.DirEntry) bool { return slices.Contains(dataDirMarks, e.Name()) }) {
		return fmt.Errorf("%s does not look like an AstraBox data dir (it has none of %s): nothing removed", dir, strings.Join(dataDirMarks, ", "))
	}
	release, err := lockDataDir(dir, true)
	if err != nil {
		return err
	}
	defer release()
	printPlan(stdio.Stdout, dir, entries, cfg)
	if !*yes {
		fmt.Fprintln(stdio.Stderr, "nothing removed: run again with --yes to remove all of the above")
		return exitCode(1)
	}
	if err := removeBoxes(ctx, dir, cfg, log, stdio.Stdout); err != nil {
		return fmt.Errorf("%w; the data dir is kept: run uninstall again once that is fixed", err)
	}
	if left := mountsUnder(dir); len(left) > 0 {
		return fmt.Errorf("mounts are left under %s (%s): the data dir is kept", dir, strings.Join(left, ", "))
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove data dir: %w", err)
	}
	fmt.Fprintf(stdio.Stdout, "removed %s\n", dir)
	return nil
}

// printPlan writes what uninstall removes from dir, from what the data
// dir records; it opens no backend.
func printPlan(w io.Writer, dir string, entries []os.DirEntry, cfg serveConfig) {
	fmt.Fprintf(w, "astrabox uninstall of data dir %s removes:\n", dir)
	for _, name := range uninstallBackends {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue
		}
		ids := boxDirs(filepath.Join(dir, name))
		fmt.Fprintf(w, "  %s backend: %d recorded box(es)", name, len(ids))
		if len(ids) > 0 {
			fmt.Fprintf(w, " (%s)", strings.Join(ids, ", "))
		}
		fmt.Fprintln(w)
		switch name {
		case "native":
			fmt.Fprintln(w, "    with their processes, cgroups, uid slots, network links and named volumes; the binary's mount,")
			fmt.Fprintln(w, "    the cgroup parent and, when no other box runs on this host, the host firewall rules")
			if d := cfg.Volumes.Dir; d != "" {
				fmt.Fprintf(w, "    (named volumes are in %s, volumes.dir of the config)\n", d)
			}
		case "docker":
			owner := cfg.Docker.Owner
			if owner == "" {
				owner = docker.DefaultOwner(filepath.Join(dir, name))
				fmt.Fprintf(w, "    and every container, network, named volume and snapshot image labelled io.astrabox.owner=%s,\n", owner)
				fmt.Fprintln(w, "    the binary's mount and the networks' host firewall rules")
			} else {
				fmt.Fprintf(w, "    only: the owner %s is configured, and replicas may share it; its other containers,\n", owner)
				fmt.Fprintln(w, "    named volumes and snapshot images are kept")
			}
		}
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	fmt.Fprintf(w, "  the data dir itself and everything in it (%s)\n", strings.Join(names, ", "))
}

// boxDirs returns the box ids a backend's data dir records.
func boxDirs(backendDir string) []string {
	entries, _ := os.ReadDir(filepath.Join(backendDir, "boxes"))
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.Name())
	}
	return ids
}

// uninstallTimeout bounds the removal of one backend's boxes.
const uninstallTimeout = 10 * time.Minute

// removeBoxes opens each backend the data dir has state of, as serve
// does, deletes its boxes (and, where the data dir owns them, its named
// volumes and snapshots), and closes it. It returns every failure.
func removeBoxes(ctx context.Context, dir string, cfg serveConfig, log *slog.Logger, out io.Writer) error {
	var errs []error
	for _, name := range uninstallBackends {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			continue
		}
		if err := uninstallBackend(ctx, dir, name, cfg, log, out); err != nil {
			errs = append(errs, fmt.Errorf("%s backend: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func uninstallBackend(ctx context.Context, dir, name string, cfg serveConfig, log *slog.Logger, out io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, uninstallTimeout)
	defer cancel()
	recorded := boxDirs(filepath.Join(dir, name))
	images, err := image.Open(filepath.Join(dir, "images"), log.With("component", "images"))
	if err != nil {
		return fmt.Errorf("open image store: %w", err)
	}
	// Opening the native backend removes the boxes past their deadline.
	p, err := newBackend(name, dir, images, cfg, nil, log)
	if err != nil {
		return err
	}
	var errs []error
	// A configured docker owner may be shared by replicas with data dirs
	// of their own: only the boxes recorded here are this data dir's.
	shared := name == "docker" && cfg.Docker.Owner != ""
	boxes, err := p.List(ctx)
	if err != nil {
		errs = append(errs, fmt.Errorf("list boxes: %w", err))
	}
	listed := map[string]bool{}
	for _, b := range boxes {
		listed[b.ID] = true
		if shared && !slices.Contains(recorded, b.ID) {
			continue
		}
		if err := p.Delete(ctx, b.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(out, "deleted %s box %s (%s)\n", name, b.ID, b.State)
	}
	for _, id := range recorded {
		if _, err := os.Stat(filepath.Join(dir, name, "boxes", id)); !listed[id] && errors.Is(err, os.ErrNotExist) {
			fmt.Fprintf(out, "deleted %s box %s (past its deadline)\n", name, id)
		}
	}
	if !shared && len(errs) == 0 {
		errs = append(errs, removeKept(ctx, name, p, out)...)
	}
	if c, ok := p.(io.Closer); ok {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("release: %w", err))
		}
	}
	return errors.Join(errs...)
}

// removeKept deletes what a backend keeps beyond its boxes: named
// volumes and snapshots.
func removeKept(ctx context.Context, name string, p sandbox.Provider, out io.Writer) []error {
	var errs []error
	if v, ok := p.(sandbox.Volumer); ok {
		vols, err := v.ListVolumes(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, vol := range vols {
			if err := v.DeleteVolume(ctx, vol.Name); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(out, "deleted %s volume %s\n", name, vol.Name)
		}
	}
	if s, ok := p.(sandbox.Snapshotter); ok && p.Capabilities().Snapshot {
		snaps, err := s.ListSnapshots(ctx)
		if err != nil {
			errs = append(errs, err)
		}
		for _, snap := range snaps {
			if err := s.DeleteSnapshot(ctx, snap.ID); err != nil {
				errs = append(errs, err)
				continue
			}
			fmt.Fprintf(out, "deleted %s snapshot %s\n", name, snap.ID)
		}
	}
	return errs
}

// mountsUnder returns the mount points under dir (dir itself excluded)
// in this process's mount namespace.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return []string{"(cannot read /proc/self/mountinfo: " + err.Error() + ")"}
	}
	// mountinfo escapes these characters in paths as octal.
	prefix := strings.NewReplacer(`\`, `\134`, " ", `\040`, "\t", `\011`, "\n", `\012`).Replace(dir) + "/"
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], prefix) {
			out = append(out, f[4])
		}
	}
	return out
}
