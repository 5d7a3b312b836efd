package native

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
)

// Snapshots of a native box are images of the image store: the box's
// image with what the box wrote over it (its overlay's upper layer)
// applied, named "astrabox-snapshot/ID" and labelled with the snapshot's
// record. The host takes the upper layer from init (see keepLayer) with
// pidfd_getfd, freezes the box while the image store reads it through
// descriptors (hostile input: see image.Store.Derive), and thaws it. A box
// on the built-in host image has no upper layer to take: NOT_SUPPORTED.
// What the box keeps on /tmp, /run, /dev/shm or its volumes is not part
// of a snapshot.

// SnapshotStore keeps the images snapshots become (the image store's
// Derive, List and Remove, adapted by whoever wires the backend).
type SnapshotStore struct {
	// Derive stores image name: image base with the overlay upper
	// directory upper (a descriptor, read as hostile) applied, owners
	// shifted down by uidBase, file content bounded by maxBytes, labels
	// kept with it.
	Derive func(ctx context.Context, name, base string, upper int, uidBase uint32, maxBytes int64, labels map[string]string) error
	// Labels returns the labels of every stored image by name.
	Labels func(ctx context.Context) (map[string]map[string]string, error)
	// Remove deletes image name.
	Remove func(ctx context.Context, name string) error
}

const (
	snapshotPrefix       = "astrabox-snapshot/"
	labelSnapshotID      = "io.astrabox.snapshot-id"
	labelSnapshotName    = "io.astrabox.snapshot-name"
	labelSnapshotSource  = "io.astrabox.snapshot-sandbox"
	labelSnapshotCreated = "io.astrabox.snapshot-created"
	labelSnapshotEntry   = "io.astrabox.snapshot-entrypoint"
	labelSnapshotOwner   = "io.astrabox.owner"
)

func snapshotImage(sid string) string { return snapshotPrefix + sid }

// Snapshot implements sandbox.Snapshotter.
func (p *Provider) Snapshot(ctx context.Context, id string, req sandbox.SnapshotRequest) (sandbox.SnapshotInfo, error) {
	if err := validID(id); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if err := sandbox.ValidateSnapshotID(req.ID); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if p.cfg.Snapshots == nil {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeNotSupported, "this native backend has no image store for snapshots")
	}
	unlock := p.lock(id)
	defer unlock()
	st, err := p.readState(id)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if st.Image == "" || st.Image == "host" {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeNotSupported, "boxes of the built-in host image cannot be snapshotted (use an imported image)")
	}
	info, err := p.info(id, st)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if info.State != sandbox.StateRunning {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeConflict, "box %s is %s: only a running box can be snapshotted", id, info.State)
	}
	upper, err := takeUpper(st)
	if err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	defer unix.Close(upper)
	if err := p.cg.freeze(id, true); err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	defer func() {
		if err := p.cg.freeze(id, false); err != nil {
			p.log.Error("thaw box after snapshot", "sandbox_id", id, "err", err)
		}
	}()
	entry, _ := json.Marshal(req.Entrypoint)
	created := time.Now().UTC().Truncate(time.Second)
	labels := map[string]string{labelSnapshotOwner: "native", labelSnapshotID: req.ID, labelSnapshotName: req.Name,
		labelSnapshotSource: id, labelSnapshotCreated: created.Format(time.RFC3339), labelSnapshotEntry: string(entry)}
	if err := p.cfg.Snapshots.Derive(ctx, snapshotImage(req.ID), st.Image, upper, uint32(hostUID(st.Slot)),
		snapshotBound(st), labels); err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("snapshot %s: %w", id, err)
	}
	p.log.Info("snapshot created", "sandbox_id", id, "snapshot_id", req.ID, "base", st.Image)
	return sandbox.SnapshotInfo{ID: req.ID, SandboxID: id, Name: req.Name, Backend: p.Name(), CreatedAt: created,
		Image: snapshotImage(req.ID), Entrypoint: req.Entrypoint}, nil
}

// snapshotBound bounds the file content read from a box's upper layer:
// its tmpfs holds at most its disk limit, but sparse files can claim more.
func snapshotBound(st boxState) int64 {
	return max(st.DiskBytes, defaultResources.DiskBytes)
}

// takeUpper returns a descriptor of the overlay upper directory of the
// box whose init st names, taken from init's fdLayer.
func takeUpper(st boxState) (int, error) {
	if st.PID <= 0 || procfs.StartTime(st.PID) != st.PIDStart {
		return -1, sandbox.Errorf(sandbox.CodeConflict, "the box's init is gone")
	}
	pidfd, err := unix.PidfdOpen(st.PID, 0)
	if err != nil {
		return -1, fmt.Errorf("pidfd of init: %w", err)
	}
	defer unix.Close(pidfd)
	if procfs.StartTime(st.PID) != st.PIDStart { // the pid was reused before pidfd_open
		return -1, sandbox.Errorf(sandbox.CodeConflict, "the box's init is gone")
	}
	root, err := unix.PidfdGetfd(pidfd, fdLayer, 0)
	if err != nil {
		return -1, fmt.Errorf("take the box's layer from init: %w", err)
	}
	defer unix.Close(root)
	upper, err := unix.Openat(root, ".upper", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("open the box's upper layer: %w", err)
	}
	return upper, nil
}

// ListSnapshots implements sandbox.Snapshotter.
func (p *Provider) ListSnapshots(ctx context.Context) ([]sandbox.SnapshotInfo, error) {
	if p.cfg.Snapshots == nil {
		return nil, nil
	}
	all, err := p.cfg.Snapshots.Labels(ctx)
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []sandbox.SnapshotInfo
	for name, l := range all {
		sid := l[labelSnapshotID]
		if l[labelSnapshotOwner] != "native" || sandbox.ValidateSnapshotID(sid) != nil || !strings.HasPrefix(name, snapshotImage(sid)) {
			continue
		}
		created, _ := time.Parse(time.RFC3339, l[labelSnapshotCreated])
		var entry []string
		_ = json.Unmarshal([]byte(l[labelSnapshotEntry]), &entry)
		out = append(out, sandbox.SnapshotInfo{ID: sid, SandboxID: l[labelSnapshotSource], Name: l[labelSnapshotName],
			Backend: p.Name(), CreatedAt: created, Image: snapshotImage(sid), Entrypoint: entry})
	}
	slices.SortFunc(out, func(a, b sandbox.SnapshotInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteSnapshot implements sandbox.Snapshotter: a snapshot a box runs
// from is CodeConflict (its image is the box's lower layer).
func (p *Provider) DeleteSnapshot(ctx context.Context, sid string) error {
	if err := sandbox.ValidateSnapshotID(sid); err != nil {
		return err
	}
	list, err := p.ListSnapshots(ctx)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(list, func(s sandbox.SnapshotInfo) bool { return s.ID == sid }) {
		return sandbox.Errorf(sandbox.CodeNotFound, "snapshot %q not found", sid)
	}
	boxes, err := p.List(ctx)
	if err != nil {
		return err
	}
	for _, b := range boxes {
		if st, err := p.readState(b.ID); err == nil && st.Image == snapshotImage(sid) {
			return sandbox.Errorf(sandbox.CodeConflict, "snapshot %q is in use by sandbox %s", sid, b.ID)
		}
	}
	if err := p.cfg.Snapshots.Remove(ctx, snapshotImage(sid)); err != nil {
		return fmt.Errorf("delete snapshot %s: %w", sid, err)
	}
	p.log.Info("snapshot deleted", "snapshot_id", sid)
	return nil
}

var _ sandbox.Snapshotter = (*Provider)(nil)
