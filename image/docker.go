package image

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// dockerManifest is an entry of a docker-save archive's manifest.json.
type dockerManifest struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

// parseDockerManifest reads manifest.json; ok is false when it is not a
// docker-save manifest (a root file system may hold a file of that name).
func parseDockerManifest(raw []byte) (ms []dockerManifest, ok bool) {
	if json.Unmarshal(raw, &ms) != nil || len(ms) == 0 {
		return nil, false
	}
	for _, m := range ms {
		if m.Config == "" || m.Layers == nil {
			return nil, false
		}
	}
	return ms, true
}

// importDocker imports the image of a `docker save` archive, applying its
// layers in order. An archive of several images must have one tagged with
// the name being imported. The image's digest is its config's (Docker's
// image ID); layer files are not checked, as the archive names no digests.
func (b *build) importDocker(ctx context.Context, src source, ms []dockerManifest) error {
	m, err := pickDocker(ms, b.ref)
	if err != nil {
		return err
	}
	cfgName, err := cleanName(m.Config)
	if err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid config path %q", m.Config)
	}
	raw, err := readSmall(src, cfgName)
	if err != nil {
		return err
	}
	if err := b.setConfig(raw); err != nil {
		return err
	}
	sum := sha256.Sum256(raw)
	b.info.Digest = "sha256:" + hex.EncodeToString(sum[:])
	for _, l := range m.Layers {
		name, err := cleanName(l)
		if err != nil {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid layer path %q", l)
		}
		r, err := src.open(name)
		if err != nil {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "layer %s is missing from the archive", l)
		}
		err = b.applyBlob(ctx, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", l, err)
		}
	}
	return nil
}

// pickDocker chooses the only image of an archive, or the one tagged ref.
func pickDocker(ms []dockerManifest, ref Ref) (dockerManifest, error) {
	if len(ms) == 1 {
		return ms[0], nil
	}
	var tags []string
	for _, m := range ms {
		for _, t := range m.RepoTags {
			if t == ref.String() || strings.HasSuffix(t, "/"+ref.String()) {
				return m, nil
			}
			tags = append(tags, t)
		}
	}
	return dockerManifest{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
		"the archive holds %d images; import it under the name of one of its tags %v", len(ms), tags)
}
