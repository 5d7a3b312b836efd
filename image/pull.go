package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	regname "github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/astrabox/astrabox/sandbox"
)

// PullOptions tune Pull.
type PullOptions struct {
	ImportOptions
	// Insecure allows plain HTTP to the registry. Registries on localhost
	// and 127.0.0.1 are spoken to over HTTP regardless.
	Insecure bool
	// Transport carries the registry requests; nil means the default.
	Transport http.RoundTripper
}

// Pull fetches the image ref ("registry/repo:tag" or "…@sha256:…") from an
// OCI registry, anonymously, for opts.Platform, and stores it as name; an
// empty name is derived from ref: its last path component and its tag
// ("registry.example/library/debian:bookworm" is "debian:bookworm"). Layers
// are applied with Import's extractor and the registry client checks their
// digests. ctx bounds the whole pull. Errors: as Import's, and
// IMAGE_NOT_FOUND when the registry has no such image (or none for the
// platform), UPSTREAM_UNREACHABLE when it cannot be reached or fails.
func (s *Store) Pull(ctx context.Context, ref, name string, opts PullOptions) (Info, error) {
	var nameOpts []regname.Option
	if opts.Insecure {
		nameOpts = append(nameOpts, regname.Insecure)
	}
	r, err := regname.ParseReference(ref, nameOpts...)
	if err != nil {
		return Info{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid image reference %q: %v", ref, err)
	}
	if name == "" {
		if name, err = nameFromRef(r); err != nil {
			return Info{}, err
		}
	}
	imgRef, plat, err := s.prepare(name, opts.ImportOptions)
	if err != nil {
		return Info{}, err
	}
	ropts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(authn.Anonymous),
		remote.WithPlatform(v1.Platform{OS: plat.OS, Architecture: plat.Arch, Variant: plat.Variant}),
		remote.WithUserAgent("astrabox"),
	}
	if opts.Transport != nil {
		ropts = append(ropts, remote.WithTransport(opts.Transport))
	}
	img, err := remote.Image(r, ropts...)
	if err != nil {
		return Info{}, registryErr(ctx, r.Name(), err)
	}
	return s.build(ctx, imgRef, plat, opts.ImportOptions, func(ctx context.Context, b *build) error {
		b.info.Format = FormatRegistry
		b.info.Source = r.Name()
		d, err := img.Digest()
		if err != nil {
			return registryErr(ctx, r.Name(), err)
		}
		b.info.Digest = d.String()
		raw, err := img.RawConfigFile()
		if err != nil {
			return registryErr(ctx, r.Name(), err)
		}
		if err := b.setConfig(raw); err != nil {
			return err
		}
		layers, err := img.Layers()
		if err != nil {
			return registryErr(ctx, r.Name(), err)
		}
		for _, l := range layers {
			rc, err := l.Compressed()
			if err != nil {
				return registryErr(ctx, r.Name(), err)
			}
			err = b.applyBlob(ctx, rc)
			rc.Close()
			if err != nil {
				if ctx.Err() == nil && !isCoded(err) {
					err = registryErr(ctx, r.Name(), err)
				}
				return fmt.Errorf("layer %d of %d: %w", b.info.Layers+1, len(layers), err)
			}
		}
		return nil
	})
}

// nameFromRef derives an image name from a registry reference.
func nameFromRef(r regname.Reference) (string, error) {
	repo := r.Context().RepositoryStr()
	repo = repo[strings.LastIndex(repo, "/")+1:]
	tag := DefaultTag
	switch r := r.(type) {
	case regname.Tag:
		tag = r.TagStr()
	case regname.Digest:
		tag = strings.ReplaceAll(r.DigestStr(), ":", "-")
	}
	name := strings.ToLower(repo) + ":" + tag
	if _, err := ParseName(name); err != nil {
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "cannot name the image after %q: give a name", r.String())
	}
	return name, nil
}

func isCoded(err error) bool {
	var se *sandbox.Error
	return errors.As(err, &se)
}

// registryErr gives a registry client error its code.
func registryErr(ctx context.Context, ref string, err error) error {
	if ctx.Err() != nil || isCoded(err) {
		return err
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch terr.StatusCode {
		case http.StatusNotFound:
			return sandbox.Errorf(sandbox.CodeImageNotFound, "pull %s: %v", ref, err)
		case http.StatusUnauthorized, http.StatusForbidden:
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "pull %s: the registry refused anonymous access: %v", ref, err)
		}
		return sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "pull %s: %v", ref, err)
	}
	if strings.Contains(err.Error(), "no child with platform") {
		return sandbox.Errorf(sandbox.CodeImageNotFound, "pull %s: %v", ref, err)
	}
	return sandbox.Errorf(sandbox.CodeUpstreamUnreachable, "pull %s: %v", ref, err)
}
