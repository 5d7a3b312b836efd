package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/sandbox"
)

// Snapshots of a Docker box are the engine's commit of its container:
// an image "astrabox-snapshot-HASH:ID" labelled with the owner, the
// snapshot's id, name, source box, creation time and entrypoint, which
// boxes start from as from any image. The engine pauses the container
// while it commits. What lives on the box's tmpfs file systems (/tmp,
// /workspace, /run) is not in a commit; a volume is never in one.

const (
	labelSnapshot        = "io.astrabox.snapshot-id"
	labelSnapshotName    = "io.astrabox.snapshot-name"
	labelSnapshotSource  = "io.astrabox.snapshot-sandbox"
	labelSnapshotCreated = "io.astrabox.snapshot-created"
	labelSnapshotEntry   = "io.astrabox.snapshot-entrypoint"
)

func (p *Provider) snapshotRef(sid string) string { return "astrabox-snapshot-" + p.hash + ":" + sid }

// Snapshot implements sandbox.Snapshotter.
func (p *Provider) Snapshot(ctx context.Context, id string, req sandbox.SnapshotRequest) (sandbox.SnapshotInfo, error) {
	if err := validID(id); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if err := sandbox.ValidateSnapshotID(req.ID); err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	unlock := p.lock(id)
	defer unlock()
	info, err := p.inspect(ctx, id)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	if info.State != sandbox.StateRunning {
		return sandbox.SnapshotInfo{}, sandbox.Errorf(sandbox.CodeConflict, "box %s is %s: only a running box can be snapshotted", id, info.State)
	}
	st, err := p.readState(id)
	if err != nil {
		return sandbox.SnapshotInfo{}, err
	}
	entry, _ := json.Marshal(req.Entrypoint)
	created := time.Now().UTC().Truncate(time.Second)
	labels := map[string]string{labelOwner: p.cfg.Owner, labelBackend: "docker", labelSnapshot: req.ID,
		labelSnapshotName: req.Name, labelSnapshotSource: id, labelSnapshotCreated: created.Format(time.RFC3339),
		labelSnapshotEntry: string(entry), labelID: "", labelClaims: ""}
	res, err := p.cli.ContainerCommit(ctx, st.Container, client.ContainerCommitOptions{Reference: p.snapshotRef(req.ID),
		Comment: "astrabox snapshot " + req.ID + " of " + id, Config: &container.Config{Labels: labels}})
	if err != nil {
		return sandbox.SnapshotInfo{}, fmt.Errorf("commit box %s: %w", id, err)
	}
	p.log.Info("snapshot created", "backend", "docker", "sandbox_id", id, "snapshot_id", req.ID, "image", res.ID)
	return sandbox.SnapshotInfo{ID: req.ID, SandboxID: id, Name: req.Name, Backend: p.Name(), CreatedAt: created,
		Image: p.snapshotRef(req.ID), Entrypoint: req.Entrypoint}, nil
}

// ListSnapshots implements sandbox.Snapshotter.
func (p *Provider) ListSnapshots(ctx context.Context) ([]sandbox.SnapshotInfo, error) {
	res, err := p.cli.ImageList(ctx, client.ImageListOptions{Filters: make(client.Filters).
		Add("label", labelOwner+"="+p.cfg.Owner).Add("label", labelSnapshot)})
	if err != nil {
		return nil, fmt.Errorf("list snapshots: %w", err)
	}
	var out []sandbox.SnapshotInfo
	for _, img := range res.Items {
		sid := img.Labels[labelSnapshot]
		if sandbox.ValidateSnapshotID(sid) != nil || !slices.Contains(img.RepoTags, p.snapshotRef(sid)) {
			continue
		}
		created, _ := time.Parse(time.RFC3339, img.Labels[labelSnapshotCreated])
		var entry []string
		_ = json.Unmarshal([]byte(img.Labels[labelSnapshotEntry]), &entry)
		out = append(out, sandbox.SnapshotInfo{ID: sid, SandboxID: img.Labels[labelSnapshotSource], Name: img.Labels[labelSnapshotName],
			Backend: p.Name(), CreatedAt: created, Image: p.snapshotRef(sid), Entrypoint: entry})
	}
	slices.SortFunc(out, func(a, b sandbox.SnapshotInfo) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// DeleteSnapshot implements sandbox.Snapshotter: the engine refuses to
// remove the image of a container that runs from it (CodeConflict).
func (p *Provider) DeleteSnapshot(ctx context.Context, sid string) error {
	if err := sandbox.ValidateSnapshotID(sid); err != nil {
		return err
	}
	ref := p.snapshotRef(sid)
	res, err := p.cli.ImageInspect(ctx, ref)
	if cerrdefs.IsNotFound(err) || (err == nil && res.Config != nil && res.Config.Labels[labelOwner] != p.cfg.Owner) {
		return sandbox.Errorf(sandbox.CodeNotFound, "snapshot %q not found", sid)
	}
	if err != nil {
		return fmt.Errorf("inspect snapshot %s: %w", sid, err)
	}
	_, err = p.cli.ImageRemove(ctx, ref, client.ImageRemoveOptions{PruneChildren: true})
	switch {
	case cerrdefs.IsNotFound(err):
		return sandbox.Errorf(sandbox.CodeNotFound, "snapshot %q not found", sid)
	case cerrdefs.IsConflict(err):
		return sandbox.Errorf(sandbox.CodeConflict, "snapshot %q is in use by a sandbox", sid)
	case err != nil:
		return fmt.Errorf("remove snapshot %s: %w", sid, err)
	}
	p.log.Info("snapshot deleted", "backend", "docker", "snapshot_id", sid)
	return nil
}

var _ sandbox.Snapshotter = (*Provider)(nil)
