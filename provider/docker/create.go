package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/egress/trust"
	execdclient "github.com/astrabox/astrabox/execd/client"
	"github.com/astrabox/astrabox/sandbox"
)

// Create implements sandbox.Provider. The image is looked up (and pulled
// when missing and allowed) before anything is made; then the box's host
// directory, its container (see containerSpec), the binary and token (for
// a remote engine), and the container is started; Create returns once
// execd answers and the Spec's entrypoint has started. ctx bounds the
// whole call; on any failure everything made so far is removed.
func (p *Provider) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	if err := spec.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	if err := p.check(spec); err != nil {
		return sandbox.Info{}, err
	}
	unlock := p.lock(id)
	defer unlock()
	info, err := p.inspect(ctx, id)
	switch {
	case err == nil && (info.State == sandbox.StateRunning || info.State == sandbox.StatePaused):
		return info, nil
	case err == nil:
		// A failed or half-made box under this id: start afresh.
		if err := p.remove(ctx, id); err != nil {
			return sandbox.Info{}, err
		}
	case !errors.Is(err, sandbox.ErrNotFound):
		return sandbox.Info{}, err
	}
	if err := p.ensureImage(ctx, spec.Image); err != nil {
		return sandbox.Info{}, err
	}
	info, err = p.start(ctx, id, spec)
	if errors.Is(err, errRace) {
		// Another server is creating this box: what is there is its.
		return sandbox.Info{}, sandbox.Errorf(sandbox.CodeConflict, "box %s is being created elsewhere", id)
	}
	if err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if rerr := p.remove(cleanup, id); rerr != nil {
			p.log.Error("clean up failed create", "backend", "docker", "sandbox_id", id, "err", rerr)
		}
		return sandbox.Info{}, err
	}
	p.log.Debug("box created", "backend", "docker", "sandbox_id", id, "image", spec.Image)
	return info, nil
}

// check refuses, before anything starts, what this backend cannot give.
func (p *Provider) check(spec sandbox.Spec) error {
	if spec.Image == "" {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "the docker backend needs an image (a Docker image reference)")
	}
	caps := p.Capabilities()
	if err := caps.Check(spec); err != nil {
		return err
	}
	if spec.Resources.DiskBytes > 0 && !slices.Contains(caps.Limits, sandbox.ResourceDisk) {
		// The tmpfs file systems would hold it, the container's writable
		// layer not: refused rather than half kept.
		return sandbox.Errorf(sandbox.CodeCapability, "resource limit %s is not enforced by this Docker backend: "+
			"its containers' writable layer is unbounded (a read-only root file system, readonlyRootfs, bounds it); "+
			"leave disk unset to get the backend's default sizes of /tmp and /workspace; enforced: %s", sandbox.ResourceDisk, joinResources(caps.Limits))
	}
	if !slices.Contains(caps.NetworkModes, spec.Network.Mode) {
		avail := make([]string, len(caps.NetworkModes))
		for i, m := range caps.NetworkModes {
			avail[i] = string(m)
		}
		why := ""
		if spec.Network.Mode == sandbox.NetworkNone && !p.local {
			why = " (a remote engine publishes execd's port, which needs a network)"
		}
		return &sandbox.Error{Code: sandbox.CodeCapability, Message: fmt.Sprintf(
			"network mode %s is not supported by this Docker backend%s; available: %s", spec.Network.Mode, why, strings.Join(avail, ", "))}
	}
	if spec.Workspace != nil {
		return &sandbox.Error{Code: sandbox.CodeCapability, Message: "the workspace field is not supported by the docker backend; use volumes"}
	}
	if spec.Network.Mode == sandbox.NetworkLimited {
		if err := egress.Validate(spec.Network); err != nil {
			return err
		}
	}
	return nil
}

func joinResources(rs []sandbox.Resource) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r)
	}
	return strings.Join(out, ", ")
}

// errRace reports that the box directory or container was made by someone
// else between Create's inspection and start: a concurrent Create of the
// same box by another server.
var errRace = errors.New("box directory exists")

// start makes and starts the box; unless it returns errRace, the caller
// removes what it made when it fails.
func (p *Provider) start(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	var tb [24]byte
	_, _ = rand.Read(tb[:])
	st := boxState{Version: stateVersion, Token: hex.EncodeToString(tb[:]), Image: spec.Image,
		Network: spec.Network.Mode, CreatedAt: time.Now().UTC()}
	if err := os.Mkdir(p.boxDir(id), 0o700); errors.Is(err, os.ErrExist) {
		return sandbox.Info{}, errRace
	} else if err != nil {
		return sandbox.Info{}, fmt.Errorf("create box directory: %w", err)
	}
	if p.local {
		st.Socket, st.RunDir = true, p.runDir(id)
		if err := p.makeRunDir(id); err != nil {
			return sandbox.Info{}, err
		}
		// execd reads the token at start; Create removes the file after.
		if err := os.WriteFile(filepath.Join(p.runDir(id), tokenName), []byte(st.Token), 0o600); err != nil {
			return sandbox.Info{}, fmt.Errorf("write token: %w", err)
		}
	} else {
		st.DialHost = p.cfg.DialHost
	}
	// The record exists before the container, so that a crash from here
	// on leaves something List reports.
	if err := p.writeState(id, st); err != nil {
		return sandbox.Info{}, err
	}
	network := ""
	var gateway netip.Addr // of the limited network
	switch spec.Network.Mode {
	case sandbox.NetworkUnrestricted:
		var err error
		if network, err = p.ensureNetwork(ctx); err != nil {
			return sandbox.Info{}, err
		}
	case sandbox.NetworkLimited:
		var err error
		if network, gateway, err = p.ensureLimited(ctx); err != nil {
			return sandbox.Info{}, err
		}
		defer p.limitedDone()
	}
	opts := p.containerSpec(id, spec, network)
	if gateway.IsValid() {
		// The engine's resolver in the box forwards to the gate's name
		// server (any DNS query is redirected to it anyway).
		opts.HostConfig.DNS = []netip.Addr{gateway}
		if _, err := os.Stat("/proc/sys/net/ipv6"); err == nil { // else the kernel has no IPv6 at all
			opts.HostConfig.Sysctls = map[string]string{"net.ipv6.conf.all.disable_ipv6": "1", "net.ipv6.conf.default.disable_ipv6": "1"}
		}
	}
	if len(spec.Volumes) > 0 {
		mounts, claims, err := p.volumeMounts(ctx, id, spec.Volumes)
		if err != nil {
			return sandbox.Info{}, err
		}
		for _, m := range mounts {
			delete(opts.HostConfig.Tmpfs, m.Target) // a volume on /workspace or /tmp replaces the tmpfs
		}
		opts.HostConfig.Mounts = append(opts.HostConfig.Mounts, mounts...)
		opts.Config.Labels[labelClaims] = strings.Join(claims, ",")
	}
	created, err := p.cli.ContainerCreate(ctx, opts)
	if cerrdefs.IsConflict(err) {
		return sandbox.Info{}, errRace // the name is taken: another server's box
	}
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create container: %w", err)
	}
	for _, w := range created.Warnings {
		p.log.Warn("engine warning", "backend", "docker", "sandbox_id", id, "warning", w)
	}
	st.Container = created.ID
	if err := p.writeState(id, st); err != nil {
		return sandbox.Info{}, err
	}
	if p.copyIn {
		token := st.Token
		if p.local {
			token = "" // it is in the run directory
		}
		if err := p.copyFiles(ctx, created.ID, token); err != nil {
			return sandbox.Info{}, err
		}
	}
	if _, err := p.cli.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return sandbox.Info{}, fmt.Errorf("start container: %w", err)
	}
	if gateway.IsValid() {
		if err := p.startEgress(ctx, id, created.ID, network, gateway, spec.Network); err != nil {
			return sandbox.Info{}, fmt.Errorf("network limited: %w", err)
		}
	}
	if !p.local {
		port, err := p.publishedPort(ctx, created.ID)
		if err != nil {
			return sandbox.Info{}, err
		}
		st.Port = port
		if err := p.writeState(id, st); err != nil {
			return sandbox.Info{}, err
		}
	}
	if err := p.waitReady(ctx, id, st); err != nil {
		return sandbox.Info{}, err
	}
	if p.local {
		_ = os.Remove(filepath.Join(p.runDir(id), tokenName))
	}
	if spec.CredentialProxy {
		// Before the entrypoint, so that its first TLS call trusts the
		// proxy.
		ca, err := p.cfg.Egress.CredentialProxyCA() // Egress is set: Check refused CredentialProxy otherwise
		if err != nil {
			return sandbox.Info{}, err
		}
		if err := trust.Install(ctx, p.execdClient(id, st), ca); err != nil {
			return sandbox.Info{}, fmt.Errorf("credentialProxy: install the egress CA: %w", err)
		}
	}
	if len(spec.Entrypoint) > 0 {
		if err := p.startEntrypoint(ctx, created.ID, spec.Entrypoint); err != nil {
			return sandbox.Info{}, err
		}
	}
	info := infoOf(id, st)
	info.State = sandbox.StateRunning
	return info, nil
}

// waitReady polls execd until it answers, the container stops, or
// StartTimeout passes.
func (p *Provider) waitReady(ctx context.Context, id string, st boxState) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.StartTimeout)
	defer cancel()
	c := p.execdClient(id, st)
	delay := 5 * time.Millisecond
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := c.Ping(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		res, ierr := p.cli.ContainerInspect(ctx, st.Container, client.ContainerInspectOptions{})
		if ierr == nil {
			if state, reason := observed(res.Container.State); state != sandbox.StateRunning && state != sandbox.StatePending {
				return fmt.Errorf("box %s stopped before execd was ready: %s (log: %s)", id, reason, p.logTail(st.Container))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("box %s: execd not ready: %w (last error: %v; log: %s)", id, ctx.Err(), err, p.logTail(st.Container))
		case <-time.After(delay):
		}
		delay = min(2*delay, 100*time.Millisecond)
	}
}

// execdClient is a client of box id's execd (st is its state).
func (p *Provider) execdClient(id string, st boxState) *execdclient.Client {
	return execdclient.New("http://execd", execdclient.WithToken(st.Token), execdclient.WithDialer(func(ctx context.Context) (net.Conn, error) {
		return p.dialState(ctx, id, st)
	}))
}

// startEntrypoint runs the Spec's entrypoint beside execd, as root in
// /workspace with the box's environment, through the engine's exec (so it
// needs no shell in the image). Docker's init adopts its orphans.
func (p *Provider) startEntrypoint(ctx context.Context, containerID string, argv []string) error {
	ex, err := p.cli.ExecCreate(ctx, containerID, client.ExecCreateOptions{User: "0:0", WorkingDir: boxWorkspace, Cmd: argv})
	if err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "start entrypoint %q: %v", argv, err)
	}
	if _, err := p.cli.ExecStart(ctx, ex.ID, client.ExecStartOptions{Detach: true}); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "start entrypoint %q: %v", argv, err)
	}
	return nil
}
