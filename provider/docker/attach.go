package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/sandbox"
)

// stateVersion is the version of boxState this package writes and reads.
const stateVersion = 1

// decodeState reads a box record (a box's state.json, or a blob handed to
// Attach); an ErrBadStateBlob-wrapped error when it is not one.
func decodeState(id string, b []byte) (boxState, error) {
	return sandbox.DecodeStateBlob[boxState](id, b, stateVersion)
}

// Attach implements sandbox.Attacher. A box whose record is in DataDir
// needs nothing from blob: it is inspected. A box whose record is missing,
// as on a server whose data dir was lost or that took over from another
// replica, gets it back from blob when the engine still runs the blob's
// container under the box's name. A box reached through a unix socket
// needs that socket on this host: in this data dir, or in the data dir of
// the replica on this host that made the box (the blob names it);
// elsewhere it cannot be re-attached (CodeUnavailable).
func (p *Provider) Attach(ctx context.Context, id string, blob []byte) (sandbox.Info, error) {
	if err := validID(id); err != nil {
		return sandbox.Info{}, err
	}
	st, err := decodeState(id, blob)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	unlock := p.lock(id)
	defer unlock()
	if _, err := p.readState(id); err == nil {
		return p.inspect(ctx, id)
	} else if !errors.Is(err, sandbox.ErrNotFound) {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	res, err := p.cli.ContainerInspect(ctx, p.containerName(id), client.ContainerInspectOptions{})
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.Info{}, fmt.Errorf("attach %s: its container is gone: %w", id, sandbox.ErrNotFound)
	case err != nil:
		return sandbox.Info{}, fmt.Errorf("attach %s: inspect container: %w", id, err)
	case st.Container == "" || res.Container.ID != st.Container:
		return sandbox.Info{}, fmt.Errorf("attach %s: the container of that name is not the blob's: %w", id, sandbox.ErrNotFound)
	}
	if st.Socket {
		dir := st.RunDir
		if dir == "" {
			dir = p.runDir(id)
		}
		// The box's own run directory: .../boxes/ID/run, of this data dir
		// or (a replica on the same host sharing the engine) another's.
		if !filepath.IsAbs(dir) || filepath.Base(dir) != dirRun || filepath.Base(filepath.Dir(dir)) != id {
			return sandbox.Info{}, fmt.Errorf("attach %s: %w: run directory %q is not the box's", id, sandbox.ErrBadStateBlob, dir)
		}
		fi, err := os.Lstat(filepath.Join(dir, sockName))
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return sandbox.Info{}, sandbox.Errorf(sandbox.CodeUnavailable, "attach %s: its execd socket is not on this host", id)
		}
		st.RunDir = dir
	}
	if err := os.MkdirAll(p.boxDir(id), 0o700); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	if err := p.writeState(id, st); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	return p.inspect(ctx, id)
}

var _ sandbox.Attacher = (*Provider)(nil)
