package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
)

// stateVersion is the version of boxState this package writes and reads.
const stateVersion = 1

// decodeState reads a state record (a box's state.json, or a blob handed
// to Attach); an ErrBadStateBlob-wrapped error when it is not one.
func decodeState(id string, b []byte) (boxState, error) {
	return sandbox.DecodeStateBlob[boxState](id, b, stateVersion)
}

// Attach implements sandbox.Attacher. Everything this Provider needs to
// reach a box is in its directory under DataDir, so a box whose record is
// there is only inspected. A box whose record was lost gets it back from
// blob when the rest of the box proves blob is its own: the blob's init
// (pid and start time) is alive and in the box's cgroup, the box's uid
// slot is the blob's and its execd socket is in place.
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
	info, err := p.inspect(id)
	if !errors.Is(err, sandbox.ErrNotFound) {
		return info, err
	}
	if why := p.unlike(id, st); why != "" {
		return sandbox.Info{}, fmt.Errorf("attach %s: %s: %w", id, why, sandbox.ErrNotFound)
	}
	if err := p.writeState(id, st); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	return p.info(id, st)
}

// unlike says why st is not the record of the box id that runs on this
// host ("" when it is).
func (p *Provider) unlike(id string, st boxState) string {
	if st.PID <= 0 || procfs.StartTime(st.PID) != st.PIDStart {
		return "its init is gone"
	}
	if procs, err := p.cg.procs(id); err != nil || !slices.Contains(procs, st.PID) {
		return "its init is not in its cgroup"
	}
	if p.slotOwner(st.Slot) != id {
		return "its uid range is not its own"
	}
	if _, err := os.Stat(filepath.Join(p.boxDir(id), sockFile)); err != nil {
		return "its execd socket is gone"
	}
	return ""
}

var _ sandbox.Attacher = (*Provider)(nil)
