package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/sandbox"
)

// Labels on everything the backend creates.
const (
	labelID      = "io.astrabox.sandbox-id"
	labelOwner   = "io.astrabox.owner"
	labelBackend = "io.astrabox.backend" // always "docker"
)

// boxState is the versioned record of a box: kept in its directory (mode
// 0600; the directory is never visible in the box) and returned as
// Info.StateBlob, from which Attach restores it.
type boxState struct {
	Version   int    `json:"version"`
	Container string `json:"container"` // engine id
	Token     string `json:"token"`
	Socket    bool   `json:"socket,omitempty"` // execd is reached through run/execd.sock
	// RunDir is the host path of that run directory: in the data dir of
	// the server that made the box, which a replica sharing the engine on
	// the same host reaches it through ("" in records from before: the
	// local data dir's).
	RunDir    string              `json:"runDir,omitempty"`
	DialHost  string              `json:"dialHost,omitempty"` // else through this host
	Port      int                 `json:"port,omitempty"`     // and published port
	Image     string              `json:"image"`
	Network   sandbox.NetworkMode `json:"network"`
	CreatedAt time.Time           `json:"createdAt"`
}

// containerName is the engine's name of box id's container: unique per
// owner, so that the engine itself refuses a second container for an id.
func (p *Provider) containerName(id string) string { return p.cfg.Owner + "-" + id }

func (p *Provider) labels(id string) map[string]string {
	return map[string]string{labelID: id, labelOwner: p.cfg.Owner, labelBackend: "docker"}
}

func (p *Provider) writeState(id string, st boxState) error {
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("encode state: %w", err)
	}
	path := filepath.Join(p.boxDir(id), stateFile)
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		return fmt.Errorf("write state: %w", err)
	}
	return nil
}

// readState returns the box's record; an ErrNotFound-wrapped error when it
// has none.
func (p *Provider) readState(id string) (boxState, error) {
	b, err := os.ReadFile(filepath.Join(p.boxDir(id), stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return boxState{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return boxState{}, fmt.Errorf("read state of %s: %w", id, err)
	}
	return decodeState(id, b)
}

// observed maps what the engine reports of a container onto a State and
// the reason behind it: a container that stopped is Failed with
// sandbox.ReasonOOMKilled when the engine says the OOM killer ended it,
// else sandbox.ReasonExited, and its exit code.
func observed(s *container.State) (sandbox.State, string) {
	if s == nil {
		return sandbox.StateFailed, "the engine reports no state"
	}
	switch s.Status {
	case container.StateCreated, container.StateRestarting:
		return sandbox.StatePending, ""
	case container.StateRunning:
		return sandbox.StateRunning, ""
	case container.StatePaused:
		return sandbox.StatePaused, ""
	case container.StateRemoving:
		return sandbox.StateStopping, "being removed"
	}
	// The engine's OOMKilled says the kernel's OOM killer ran in the
	// container; a container that still exited 0 was not ended by it.
	code, reason := sandbox.ReasonExited, fmt.Sprintf("container %s with exit code %d", s.Status, s.ExitCode)
	if s.OOMKilled && s.ExitCode != 0 {
		code = sandbox.ReasonOOMKilled
		reason += " after the kernel's OOM killer ran in it at the box's memory limit"
	}
	if s.Error != "" {
		reason += ": " + s.Error
	}
	return sandbox.StateFailed, code + ": " + reason
}

// inspect combines the box's record with the engine's view of its
// container.
func (p *Provider) inspect(ctx context.Context, id string) (sandbox.Info, error) {
	st, stErr := p.readState(id)
	if stErr != nil && !errors.Is(stErr, sandbox.ErrNotFound) {
		return sandbox.Info{}, stErr
	}
	res, err := p.cli.ContainerInspect(ctx, p.containerName(id), client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		if stErr != nil {
			return sandbox.Info{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
		}
		info := infoOf(id, st)
		info.State, info.Reason = sandbox.StateFailed, sandbox.ReasonLost+": its container is gone"
		return info, nil
	case err != nil:
		return sandbox.Info{}, fmt.Errorf("inspect box %s: %w", id, err)
	}
	c := res.Container
	if stErr != nil {
		info := sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "container without a box record (an interrupted create)"}
		info.CreatedAt, _ = time.Parse(time.RFC3339Nano, c.Created)
		return info, nil
	}
	info := infoOf(id, st)
	info.State, info.Reason = observed(c.State)
	if st.Container != "" && c.ID != st.Container {
		info.State, info.Reason = sandbox.StateFailed, "its container was replaced behind the backend's back"
	}
	return info, nil
}

func infoOf(id string, st boxState) sandbox.Info {
	b, _ := json.Marshal(st)
	return sandbox.Info{ID: id, CreatedAt: st.CreatedAt, AccessToken: st.Token, StateBlob: b}
}

// Inspect implements sandbox.Provider.
func (p *Provider) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	return p.inspect(ctx, id)
}

// List implements sandbox.Provider: every container labelled with this
// backend's owner, and every box record, with or without a container. A
// container without a record, or a record without a container (left by a
// crash), is listed as Failed so that the reconciler deletes it.
func (p *Provider) List(ctx context.Context) ([]sandbox.Info, error) {
	res, err := p.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", labelOwner+"="+p.cfg.Owner),
	})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	seen := map[string]bool{}
	var out []sandbox.Info
	for _, c := range res.Items {
		id := c.Labels[labelID]
		if validID(id) != nil || seen[id] {
			continue
		}
		seen[id] = true
		info := sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "container without a box record",
			CreatedAt: time.Unix(c.Created, 0).UTC()}
		if st, err := p.readState(id); err == nil {
			info = infoOf(id, st)
			info.State, info.Reason = observed(&container.State{Status: c.State})
			if info.State == sandbox.StateFailed {
				info.Reason = "container " + c.Status
			}
		}
		out = append(out, info)
	}
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil {
		return nil, fmt.Errorf("list boxes: %w", err)
	}
	for _, e := range entries {
		id := e.Name()
		if seen[id] || validID(id) != nil {
			continue
		}
		info := sandbox.Info{ID: id, State: sandbox.StateFailed, Reason: "box record without a container"}
		if st, err := p.readState(id); err == nil {
			info = infoOf(id, st)
			info.State, info.Reason = sandbox.StateFailed, sandbox.ReasonLost+": its container is gone"
		}
		out = append(out, info)
	}
	return out, nil
}

// Delete implements sandbox.Provider: the container is removed by force
// (its processes are killed), then the box's host directory goes. It
// returns once the engine no longer knows the container.
func (p *Provider) Delete(ctx context.Context, id string) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	return p.remove(ctx, id)
}

func (p *Provider) remove(ctx context.Context, id string) error {
	name := p.containerName(id)
	// A box another replica on this host made keeps its run directory in
	// that replica's data dir: it goes with the box too.
	var foreignRun string
	st, stErr := p.readState(id)
	if stErr == nil && st.RunDir != "" && st.RunDir != p.runDir(id) {
		foreignRun = st.RunDir
	}
	delay := 10 * time.Millisecond
	for {
		_, rmErr := p.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		_, err := p.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
		if cerrdefs.IsNotFound(err) {
			break
		}
		// Still there: "removal already in progress", or a transient
		// engine error. Try again until ctx ends.
		if rmErr != nil && !cerrdefs.IsNotFound(rmErr) {
			err = rmErr
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("delete %s: container not confirmed gone: %w (last error: %v)", id, ctx.Err(), err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
	p.releaseEgress(ctx, id, stErr == nil && st.Network == sandbox.NetworkLimited)
	if err := p.removeBoxDir(id); err != nil {
		return fmt.Errorf("delete %s: %w", id, err)
	}
	if foreignRun != "" {
		if err := unmountDir(foreignRun); err != nil {
			return fmt.Errorf("delete %s: %w", id, err)
		}
		if err := os.RemoveAll(filepath.Dir(foreignRun)); err != nil {
			return fmt.Errorf("delete %s: remove the making replica's box directory: %w", id, err)
		}
	}
	return nil
}

// Pause implements sandbox.Provider: the engine freezes the container's
// cgroup. Pausing a paused box is a no-op.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return p.setPaused(ctx, id, true)
}

// Resume implements sandbox.Provider. Resuming a running box is a no-op.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return p.setPaused(ctx, id, false)
}

func (p *Provider) setPaused(ctx context.Context, id string, pause bool) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	info, err := p.inspect(ctx, id)
	if err != nil {
		return err
	}
	switch {
	case info.State == sandbox.StatePaused && pause, info.State == sandbox.StateRunning && !pause:
		return nil
	case info.State != sandbox.StateRunning && info.State != sandbox.StatePaused:
		return sandbox.Errorf(sandbox.CodeConflict, "box %s is %s: %s", id, info.State, info.Reason)
	}
	if pause {
		_, err = p.cli.ContainerPause(ctx, p.containerName(id), client.ContainerPauseOptions{})
	} else {
		_, err = p.cli.ContainerUnpause(ctx, p.containerName(id), client.ContainerUnpauseOptions{})
	}
	if err != nil {
		return fmt.Errorf("pause %s (%t): %w", id, pause, err)
	}
	return nil
}

// Dial implements sandbox.Provider: execd's unix socket in the box's run
// directory for a local engine, its published port for a remote one.
func (p *Provider) Dial(ctx context.Context, id string) (net.Conn, error) {
	if err := validID(id); err != nil {
		return nil, err
	}
	st, err := p.readState(id)
	if err != nil {
		return nil, err
	}
	return p.dialState(ctx, id, st)
}

func (p *Provider) dialState(ctx context.Context, id string, st boxState) (net.Conn, error) {
	if st.Socket {
		dir := st.RunDir
		if dir == "" {
			dir = p.runDir(id)
		}
		c, err := dialRunSocket(ctx, dir)
		if err != nil {
			return nil, fmt.Errorf("dial box %s: %w", id, err)
		}
		return c, nil
	}
	if st.Port == 0 {
		return nil, fmt.Errorf("dial box %s: its execd has no address yet", id)
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", net.JoinHostPort(st.DialHost, strconv.Itoa(st.Port)))
	if err != nil {
		return nil, fmt.Errorf("dial box %s: %w", id, err)
	}
	return c, nil
}
