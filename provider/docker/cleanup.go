package docker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/astrabox/astrabox/internal/boxbin"
)

// closeTimeout bounds what Close asks of the engine.
const closeTimeout = 30 * time.Second

// Close releases what the backend set up on the host that no box needs:
// a server calls it when it stops (its boxes keep running, and the next
// server re-attaches them), tests and uninstall when they are done. The
// owner's unrestricted and limited networks go, with their host rules
// and the limited network's gate, when no container is attached to them,
// whichever Provider of the owner made them: a server restarted on the
// data dir removes on its stop what an earlier one left. When DataDir
// holds no box, Close also releases the binary's tmpfs and removes
// DataDir's empty directories, so that a stop with no box leaves DataDir
// as New found it. With boxes left, all they need stays: their networks,
// rules, gate records, run directories and the binary they were given.
// Close closes the engine client last; the Provider must not be used
// afterwards. A failure to reach the engine is returned, joined with any
// other failure, and leaves the networks for the next Close.
func (p *Provider) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	if err := p.removeNetworkIfUnused(ctx, true); err != nil {
		errs = append(errs, err)
	}
	if err := p.removeLimitedIfUnused(ctx, true); err != nil {
		errs = append(errs, err)
	}
	empty, err := p.noBoxes()
	if err != nil {
		errs = append(errs, err)
	}
	if empty {
		if p.binary != "" {
			if err := boxbin.Release(filepath.Dir(p.binary)); err != nil {
				errs = append(errs, fmt.Errorf("docker: %w", err))
			}
		}
		for _, d := range []string{dirBin, dirBoxes} {
			if err := os.Remove(filepath.Join(p.cfg.DataDir, d)); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("docker: %w", err))
			}
		}
	}
	errs = append(errs, p.cli.Close())
	return errors.Join(errs...)
}

// noBoxes reports whether DataDir holds no box directory (of a box, a
// half-made one, or one being created). Any entry counts: what is not
// understood is kept.
func (p *Provider) noBoxes() (bool, error) {
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("docker: %w", err)
	}
	return len(entries) == 0, nil
}
