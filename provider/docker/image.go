package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/sandbox"
)

// ensureImage makes sure the engine holds image ref: it is pulled when
// missing (unless NoPull). An image that is neither held nor pullable is a
// CodeImageNotFound error; a malformed reference a CodeInvalidRequest one.
func (p *Provider) ensureImage(ctx context.Context, ref string) error {
	_, err := p.cli.ImageInspect(ctx, ref)
	switch {
	case err == nil:
		return nil
	case cerrdefs.IsInvalidArgument(err):
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid image reference %q: %v", ref, err)
	case !cerrdefs.IsNotFound(err):
		return fmt.Errorf("inspect image %s: %w", ref, err)
	}
	if p.cfg.NoPull {
		return sandbox.Errorf(sandbox.CodeImageNotFound, "image %q is not on the Docker engine (pulling is off)", ref)
	}
	if err := checkRegistry(ctx, ref, p.cfg.AllowRegistries, nil); err != nil {
		return err
	}
	if err := p.pullShared(ctx, ref); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("pull image %s: %w", ref, err)
		}
		if cerrdefs.IsInvalidArgument(err) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid image reference %q", ref)
		}
		p.log.Warn("image pull failed", "backend", "docker", "image", ref, "err", err)
		return pullFailure(ref, err)
	}
	if _, err := p.cli.ImageInspect(ctx, ref); err != nil {
		return sandbox.Errorf(sandbox.CodeImageNotFound, "image %q: pulled, but the engine does not show it: %v", ref, err)
	}
	return nil
}

// pullState is one pull in flight, shared by the creates that wait for it.
type pullState struct {
	done chan struct{}
	err  error // set before done is closed
}

// pullShared pulls ref once however many creates ask, bounded by
// PullTimeout rather than by any one create: a create that gives up
// (ctx) leaves the pull running, and a later create finds the image.
func (p *Provider) pullShared(ctx context.Context, ref string) error {
	p.mu.Lock()
	pl, ok := p.pulls[ref]
	if !ok {
		pl = &pullState{done: make(chan struct{})}
		p.pulls[ref] = pl
		p.log.Info("pulling image", "backend", "docker", "image", ref)
		go func() {
			pctx, cancel := context.WithTimeout(context.Background(), p.cfg.PullTimeout)
			defer cancel()
			pl.err = p.pull(pctx, ref)
			p.mu.Lock()
			delete(p.pulls, ref)
			p.mu.Unlock()
			close(pl.done)
		}()
	}
	p.mu.Unlock()
	select {
	case <-pl.done:
		return pl.err
	case <-ctx.Done():
		return fmt.Errorf("image %s is still being pulled: %w", ref, ctx.Err())
	}
}

// pull pulls ref and waits until the engine reports the end of the pull.
func (p *Provider) pull(ctx context.Context, ref string) error {
	resp, err := p.cli.ImagePull(ctx, ref, client.ImagePullOptions{})
	if err != nil {
		return err
	}
	defer resp.Close()
	return resp.Wait(ctx)
}

// ImportRootfs loads the root file system tarball r (optionally gzip-,
// bzip2- or xz-compressed) into the engine as image name (a reference such
// as "example/debian:12"), like `docker import`: tests and the CLI build
// images with it from a rootfs, with no registry. ctx bounds the upload.
func (p *Provider) ImportRootfs(ctx context.Context, name string, r io.Reader) error {
	return importRootfs(ctx, p.cli, name, r)
}

// ImportRootfs loads a root file system tarball into the engine that cfg
// names (only its Host, FromEnv and APIVersion are used) without preparing
// a backend: what `astrabox image import --docker` does.
func ImportRootfs(ctx context.Context, cfg Config, name string, r io.Reader) error {
	cli, err := newClient(cfg)
	if err != nil {
		return fmt.Errorf("docker: engine client: %w", err)
	}
	defer cli.Close()
	return importRootfs(ctx, cli, name, r)
}

func importRootfs(ctx context.Context, cli *client.Client, name string, r io.Reader) error {
	if name == "" {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "import needs an image name")
	}
	resp, err := cli.ImageImport(ctx, client.ImageImportSource{Source: r, SourceName: "-"}, name, client.ImageImportOptions{})
	if err != nil {
		if cerrdefs.IsInvalidArgument(err) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "import image %q: %v", name, err)
		}
		return fmt.Errorf("import image %s: %w", name, err)
	}
	defer resp.Close()
	if err := readProgress(resp); err != nil {
		return fmt.Errorf("import image %s: %w", name, err)
	}
	return nil
}

// readProgress consumes an engine progress stream (JSON messages) and
// returns the first error it reports.
func readProgress(r io.Reader) error {
	dec := json.NewDecoder(r)
	for {
		var m struct {
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("read engine progress: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
	}
}

// RemoveImage removes image name from the engine (tests and the CLI);
// a missing image is not an error.
func (p *Provider) RemoveImage(ctx context.Context, name string) error {
	_, err := p.cli.ImageRemove(ctx, name, client.ImageRemoveOptions{PruneChildren: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove image %s: %w", name, err)
	}
	return nil
}

// HasImage reports whether the engine holds image name.
func (p *Provider) HasImage(ctx context.Context, name string) (bool, error) {
	_, err := p.cli.ImageInspect(ctx, name)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect image %s: %w", name, err)
	}
	return true, nil
}

var _ sandbox.ImageChecker = (*Provider)(nil)
