package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// A box's deadline (its Spec.Timeout from create, moved by Renew) is kept
// in DataDir/boxes/<id>/deadline, which the host writes and the box's init
// reads, on a descriptor it got at start (fdDeadline), once a second: at
// the deadline init kills every process of the box and exits, whether or
// not a server runs. A Provider made on the data dir later removes what is
// left of boxes past their deadline (New calls sweepExpired), and so does
// the reconciler of a running server. The file holds the deadline in Unix
// milliseconds as deadlineWidth decimal digits and a newline, rewritten in
// place; 0 means none.
const (
	deadlineFile  = "deadline"
	deadlineWidth = 20
)

// encodeDeadline is the file's content for at (zero: none).
func encodeDeadline(at time.Time) []byte {
	var ms int64
	if !at.IsZero() {
		ms = max(at.UnixMilli(), 1)
	}
	return fmt.Appendf(nil, "%0*d\n", deadlineWidth, ms)
}

// decodeDeadline parses the file's content; ok is false when b is not one
// (a torn read, say).
func decodeDeadline(b []byte) (at time.Time, ok bool) {
	if len(b) != deadlineWidth+1 || b[deadlineWidth] != '\n' {
		return time.Time{}, false
	}
	ms, err := strconv.ParseInt(string(b[:deadlineWidth]), 10, 64)
	if err != nil || ms < 0 {
		return time.Time{}, false
	}
	if ms == 0 {
		return time.Time{}, true
	}
	return time.UnixMilli(ms), true
}

// deadlineOf returns the deadline of a box of spec created now (zero:
// none).
func deadlineOf(spec sandbox.Spec) time.Time {
	if spec.Timeout <= 0 {
		return time.Time{}
	}
	return time.Now().Add(spec.Timeout)
}

// writeDeadline sets the deadline of box id in its directory, creating
// the file when create is set (a box being made) and otherwise rewriting
// the file init has open.
func (p *Provider) writeDeadline(id string, at time.Time, create bool) error {
	flags := os.O_WRONLY
	if create {
		flags |= os.O_CREATE | os.O_EXCL
	}
	f, err := os.OpenFile(filepath.Join(p.boxDir(id), deadlineFile), flags, 0o600)
	if err != nil {
		return fmt.Errorf("box deadline: %w", err)
	}
	_, err = f.WriteAt(encodeDeadline(at), 0)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("box deadline: %w", err)
	}
	return nil
}

// readDeadline returns the deadline of box id (zero: none, or no file).
func (p *Provider) readDeadline(id string) (time.Time, error) {
	b, err := os.ReadFile(filepath.Join(p.boxDir(id), deadlineFile))
	if errors.Is(err, os.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("box deadline: %w", err)
	}
	at, ok := decodeDeadline(b)
	if !ok {
		return time.Time{}, fmt.Errorf("box deadline of %s: malformed file", id)
	}
	return at, nil
}

// Renew implements sandbox.Renewer: the box's deadline, which its init
// enforces, becomes at, unless it is at or after at already. A box that
// had no deadline gets at as its deadline (the server gave it an expiry).
// A box with no record wraps ErrNotFound.
func (p *Provider) Renew(ctx context.Context, id string, at time.Time) error {
	if err := validID(id); err != nil {
		return err
	}
	unlock := p.lock(id)
	defer unlock()
	if _, err := p.readState(id); err != nil {
		return err
	}
	cur, err := p.readDeadline(id)
	if err != nil {
		return err
	}
	if !cur.IsZero() && !at.After(cur) {
		return nil
	}
	return p.writeDeadline(id, at, false)
}

var _ sandbox.Renewer = (*Provider)(nil)

// sweepExpired removes every box of the data dir whose deadline has
// passed: its init has killed it (or, frozen, could not), and no server
// may have been running to release its cgroups, uid range and directory.
func (p *Provider) sweepExpired(ctx context.Context) {
	entries, err := os.ReadDir(filepath.Join(p.cfg.DataDir, dirBoxes))
	if err != nil {
		return
	}
	now := time.Now()
	for _, e := range entries {
		id := e.Name()
		if validID(id) != nil {
			continue
		}
		at, err := p.readDeadline(id)
		if err != nil || at.IsZero() || now.Before(at) {
			continue
		}
		unlock := p.lock(id)
		err = p.remove(ctx, id)
		unlock()
		if err != nil {
			p.log.Error("remove expired box", "sandbox_id", id, "err", err)
			continue
		}
		p.log.Info("removed expired box", "sandbox_id", id, "deadline", at.UTC().Format(time.RFC3339))
	}
}

// initDeadline is init's view of the deadline file (fdDeadline).
type initDeadline struct{ f *os.File }

// passed reports whether the deadline in the file has passed at now. A
// file that cannot be read or parsed keeps the box running (the host's
// reconciler still removes it at its expiry); a passed deadline is read
// twice, alike, so that a read torn by a renewal rewriting the file never
// ends a box.
func (d initDeadline) passed(now time.Time) (time.Time, bool) {
	at, ok := d.read()
	if !ok || at.IsZero() || now.Before(at) {
		return time.Time{}, false
	}
	again, ok := d.read()
	return at, ok && again.Equal(at)
}

func (d initDeadline) read() (time.Time, bool) {
	b := make([]byte, deadlineWidth+1)
	if n, _ := d.f.ReadAt(b, 0); n != len(b) {
		return time.Time{}, false
	}
	return decodeDeadline(b)
}
