package process

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/astrabox/astrabox/sandbox"
)

// stateVersion is the version of state this package writes and reads.
const stateVersion = 1

// decodeState reads a state record (a box's state.json, or a blob handed
// to Attach); an ErrBadStateBlob-wrapped error when it is not one.
func decodeState(id string, b []byte) (state, error) {
	return sandbox.DecodeStateBlob[state](id, b, stateVersion)
}

// Attach implements sandbox.Attacher. A box's directory holds all this
// Provider needs to reach it, so a box whose record is there is only
// inspected. A box whose record was lost while its execd still runs (the
// blob's pid is alive and its socket is in place) gets the record back
// from blob.
func (p *Provider) Attach(ctx context.Context, id string, blob []byte) (sandbox.Info, error) {
	dir, err := p.boxDir(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	st, err := decodeState(id, blob)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: %w", id, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	info, err := p.inspect(id)
	if !errors.Is(err, sandbox.ErrNotFound) {
		return info, err
	}
	if !alive(st.PID) {
		return sandbox.Info{}, fmt.Errorf("attach %s: its execd is gone: %w", id, sandbox.ErrNotFound)
	}
	if _, err := os.Stat(filepath.Join(dir, "execd.sock")); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: its execd socket is gone: %w", id, sandbox.ErrNotFound)
	}
	b, err := json.Marshal(st)
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: encode state: %w", id, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		return sandbox.Info{}, fmt.Errorf("attach %s: write state: %w", id, err)
	}
	return p.info(id, st), nil
}

var _ sandbox.Attacher = (*Provider)(nil)
