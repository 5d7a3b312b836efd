package docker

import (
	"archive/tar"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/sandbox"
)

// boxCapabilities are all that root in a box keeps; every other
// capability is dropped (the container's bounding set holds only these).
// Without a user namespace they are real capabilities, confined by the
// box's namespaces and mounts, so the set is what execd and ordinary root
// workloads (package installs, file ownership) need, and nothing more:
//
//   - CHOWN, DAC_OVERRIDE, FOWNER, FSETID: execd's file API and root
//     workloads handle files of every user in the box;
//   - SETUID, SETGID: execd runs commands as the uid and gid a request
//     names;
//   - SETPCAP: execd empties the bounding set of the processes it starts
//     as other users, so they can never regain a capability;
//   - KILL: execd signals and kills the process groups of those commands;
//   - NET_BIND_SERVICE: a root workload may serve on a port below 1024.
//
// Dropped among Docker's defaults: MKNOD (device nodes), NET_RAW (raw and
// packet sockets), SYS_CHROOT, AUDIT_WRITE and SETFCAP (file capabilities).
var boxCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_FSETID",
	"CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_KILL", "CAP_NET_BIND_SERVICE",
}

// maskedPaths are the engine's default masked paths plus /proc/kallsyms
// (kernel symbol addresses); setting the list replaces the default.
var maskedPaths = []string{
	"/proc/asound", "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats",
	"/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi",
	"/sys/firmware", "/sys/devices/virtual/powercap", "/proc/kallsyms",
}

// execdPort is execd's TCP port in a box.
var execdPort = network.MustParsePort(strconv.Itoa(wire.DefaultPort) + "/tcp")

// containerSpec is the container of box id: execd (under Docker's init)
// as root, hardened as the package documentation says. network is the
// engine network of an unrestricted box ("" for none).
func (p *Provider) containerSpec(id string, spec sandbox.Spec, netName string) client.ContainerCreateOptions {
	res := spec.Resources.WithDefaults(p.cfg.Defaults)
	cmd := []string{boxBinary, "execd", "--workdir", boxWorkspace, "--log-level", "warn"}
	if p.local {
		// Only the box itself may use execd's TCP port; the host comes in
		// through the socket.
		cmd = append(cmd, "--listen", fmt.Sprintf("127.0.0.1:%d", wire.DefaultPort),
			"--unix", boxRun+"/"+sockName, "--access-token-file", boxRun+"/"+tokenName)
	} else {
		cmd = append(cmd, "--listen", fmt.Sprintf(":%d", wire.DefaultPort), "--access-token-file", boxToken)
	}
	hostname := id
	if len(hostname) > 63 {
		hostname = hostname[:63]
	}
	cfg := &container.Config{
		Hostname:   hostname,
		User:       "0:0",
		Env:        boxEnv(spec.Env),
		Entrypoint: cmd[:1],
		Cmd:        cmd[1:],
		Image:      spec.Image,
		WorkingDir: boxWorkspace,
		Labels:     p.labels(id),
	}
	// Each writable file system is bounded in bytes and in files (one
	// inode per 4 KiB of size), and, being memory, by the memory limit.
	tmpBytes := min(res.DiskBytes, 256<<20)
	tmpfs := map[string]string{
		"/tmp":       tmpfsOptions("exec", tmpBytes, "1777"),
		boxWorkspace: tmpfsOptions("exec", res.DiskBytes, "0755"),
	}
	if p.cfg.ReadonlyRootfs {
		tmpfs["/var/tmp"] = tmpfsOptions("exec", tmpBytes, "1777")
		tmpfs["/run"] = tmpfsOptions("noexec", 16<<20, "0755")
	}
	pids := res.PIDs
	init := true
	hc := &container.HostConfig{
		NetworkMode:   container.NetworkMode("none"),
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		// A box's root can write to the init's stdout: bound the log.
		LogConfig:      container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "1m", "max-file": "1"}},
		CapDrop:        []string{"ALL"},
		CapAdd:         slices.Clone(boxCapabilities),
		SecurityOpt:    []string{"no-new-privileges:true"},
		IpcMode:        container.IPCModePrivate,
		CgroupnsMode:   container.CgroupnsModePrivate,
		ReadonlyRootfs: p.cfg.ReadonlyRootfs,
		Tmpfs:          tmpfs,
		ShmSize:        min(res.MemoryBytes/2, 64<<20),
		Runtime:        cmp.Or(spec.Runtime, p.cfg.Runtime),
		Init:           &init,
		MaskedPaths:    slices.Clone(maskedPaths),
		Resources: container.Resources{
			Memory:     res.MemoryBytes,
			MemorySwap: res.MemoryBytes, // no swap
			NanoCPUs:   res.MilliCPU * 1_000_000,
			PidsLimit:  &pids,
			Ulimits:    []*container.Ulimit{{Name: "core", Soft: 0, Hard: 0}},
		},
	}
	if p.cfg.SeccompProfile != "" {
		hc.SecurityOpt = append(hc.SecurityOpt, "seccomp="+p.cfg.SeccompProfile)
	}
	if p.cfg.StorageQuota {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(res.DiskBytes, 10)}
	}
	if netName != "" {
		hc.NetworkMode = container.NetworkMode(netName)
	}
	if !p.copyIn {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.binary, Target: boxBinary, ReadOnly: true,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	}
	if p.local {
		hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, Source: p.runDir(id), Target: boxRun,
			BindOptions: &mount.BindOptions{Propagation: mount.PropagationRPrivate}})
	} else {
		cfg.ExposedPorts = network.PortSet{execdPort: struct{}{}}
		ip, err := netip.ParseAddr(p.cfg.PublishIP)
		if err != nil {
			ip = netip.IPv4Unspecified()
		}
		hc.PortBindings = network.PortMap{execdPort: {{HostIP: ip}}}
	}
	return client.ContainerCreateOptions{Name: p.containerName(id), Config: cfg, HostConfig: hc}
}

// tmpfsOptions are the mount options of a tmpfs of size bytes.
func tmpfsOptions(exec string, size int64, mode string) string {
	return fmt.Sprintf("rw,%s,nosuid,nodev,size=%d,nr_inodes=%d,mode=%s", exec, size, max(size/4096, 1024), mode)
}

// boxEnv is the environment of execd and the entrypoint: the image's, then
// these defaults, then the Spec's.
func boxEnv(extra map[string]string) []string {
	env := map[string]string{"HOME": "/root", "LANG": "C.UTF-8", "TERM": "xterm"}
	for k, v := range extra {
		env[k] = v
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// copyFiles copies the binary and, unless token is empty, the access
// token into the created container, before it starts.
func (p *Provider) copyFiles(ctx context.Context, containerID, token string) error {
	bin, err := os.Open(p.cfg.Binary)
	if err != nil {
		return fmt.Errorf("copy binary: %w", err)
	}
	defer bin.Close()
	fi, err := bin.Stat()
	if err != nil {
		return fmt.Errorf("copy binary: %w", err)
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		now := time.Now()
		err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(boxHome, "/") + "/", Mode: 0o755, ModTime: now})
		if err == nil && token != "" {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(boxToken, "/"), Mode: 0o600, Size: int64(len(token)), ModTime: now})
			if err == nil {
				_, err = tw.Write([]byte(token))
			}
		}
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(boxBinary, "/"), Mode: 0o755, Size: fi.Size(), ModTime: now})
		}
		if err == nil {
			_, err = io.Copy(tw, io.LimitReader(bin, fi.Size()))
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	_, err = p.cli.CopyToContainer(ctx, containerID, client.CopyToContainerOptions{DestinationPath: "/", Content: pr})
	pr.CloseWithError(err)
	if err != nil {
		return fmt.Errorf("copy into container: %w", err)
	}
	return nil
}

// publishedPort reads back the host port the engine published execd's
// port on.
func (p *Provider) publishedPort(ctx context.Context, containerID string) (int, error) {
	res, err := p.cli.ContainerInspect(ctx, containerID, client.ContainerInspectOptions{})
	if err != nil {
		return 0, fmt.Errorf("inspect container: %w", err)
	}
	if ns := res.Container.NetworkSettings; ns != nil {
		for _, b := range ns.Ports[execdPort] {
			if port, err := strconv.Atoi(b.HostPort); err == nil && port > 0 {
				return port, nil
			}
		}
	}
	return 0, fmt.Errorf("the engine published no port for execd")
}

// logTail returns the end of the container's log (execd's and the
// init's output), for error messages.
func (p *Provider) logTail(containerID string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rc, err := p.cli.ContainerLogs(ctx, containerID, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "20"})
	if err != nil {
		return "no log: " + err.Error()
	}
	defer rc.Close()
	var out bytes.Buffer
	_, _ = stdcopy.StdCopy(&out, &out, io.LimitReader(rc, 64<<10))
	s := strings.TrimSpace(out.String())
	if len(s) > 1024 {
		s = s[len(s)-1024:]
	}
	if s == "" {
		return "empty"
	}
	return s
}
