package image

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"strings"

	"github.com/astrabox/astrabox/sandbox"
)

// Media types of manifests and indexes.
const (
	mtOCIIndex       = "application/vnd.oci.image.index.v1+json"
	mtDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	mtOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	mtDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
)

// maxJSON bounds the manifests, indexes and configs read from an archive.
const maxJSON = 8 << 20

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Platform    *ociPlatform      `json:"platform,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

type ociPlatform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
	Variant      string `json:"variant,omitempty"`
}

func (p *ociPlatform) platform() platform {
	return platform{OS: p.OS, Arch: p.Architecture, Variant: p.Variant}
}

func (p *ociPlatform) String() string { return p.platform().String() }

type ociIndex struct {
	MediaType string       `json:"mediaType"`
	Manifests []descriptor `json:"manifests"`
}

type ociManifest struct {
	MediaType string       `json:"mediaType"`
	Config    descriptor   `json:"config"`
	Layers    []descriptor `json:"layers"`
}

// importOCI imports the image of an OCI image layout: the single image
// manifest it holds, or the one for the build's platform. Every blob read
// is checked against its digest. The image's digest is its manifest's.
func (b *build) importOCI(ctx context.Context, src source) error {
	if !src.has("oci-layout") {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "not an OCI image layout: no oci-layout file")
	}
	raw, err := readSmall(src, "index.json")
	if err != nil {
		return err
	}
	var idx ociIndex
	if err := json.Unmarshal(raw, &idx); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "parse index.json: %v", err)
	}
	cands, err := collectManifests(src, idx.Manifests, 0)
	if err != nil {
		return err
	}
	d, err := pickManifest(cands, b.platform)
	if err != nil {
		return err
	}
	if raw, err = readBlob(src, d); err != nil {
		return err
	}
	var man ociManifest
	if err := json.Unmarshal(raw, &man); err != nil {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "parse manifest %s: %v", d.Digest, err)
	}
	if raw, err = readBlob(src, man.Config); err != nil {
		return err
	}
	if err := b.setConfig(raw); err != nil {
		return err
	}
	b.info.Digest = d.Digest
	for _, l := range man.Layers {
		r, err := openBlob(src, l)
		if err != nil {
			return err
		}
		err = b.applyBlob(ctx, r)
		r.Close()
		if err != nil {
			return fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	return nil
}

// collectManifests lists the image manifests that descs lead to, through
// nested indexes, leaving out attestations and other artifacts.
func collectManifests(src source, descs []descriptor, depth int) ([]descriptor, error) {
	if depth > 4 {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "image indexes nested too deep")
	}
	var out []descriptor
	for _, d := range descs {
		if d.Annotations["vnd.docker.reference.type"] == "attestation-manifest" ||
			d.Platform != nil && d.Platform.OS == "unknown" {
			continue
		}
		mt := d.MediaType
		var raw []byte
		if mt == "" || mt == mtOCIIndex || mt == mtDockerList {
			var err error
			if raw, err = readBlob(src, d); err != nil {
				return nil, err
			}
		}
		if mt == "" {
			var probe struct {
				Manifests json.RawMessage `json:"manifests"`
				Layers    json.RawMessage `json:"layers"`
			}
			if json.Unmarshal(raw, &probe) == nil {
				switch {
				case probe.Manifests != nil:
					mt = mtOCIIndex
				case probe.Layers != nil:
					mt = mtOCIManifest
				}
			}
		}
		switch mt {
		case mtOCIIndex, mtDockerList:
			var sub ociIndex
			if err := json.Unmarshal(raw, &sub); err != nil {
				return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "parse index %s: %v", d.Digest, err)
			}
			more, err := collectManifests(src, sub.Manifests, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, more...)
		case mtOCIManifest, mtDockerManifest:
			out = append(out, d)
		}
	}
	return out, nil
}

// pickManifest chooses the only manifest, or the first for want.
func pickManifest(cands []descriptor, want platform) (descriptor, error) {
	switch len(cands) {
	case 0:
		return descriptor{}, sandbox.Errorf(sandbox.CodeInvalidRequest, "no image manifest in the archive")
	case 1:
		return cands[0], nil
	}
	for _, d := range cands {
		if d.Platform != nil && want.matches(d.Platform.platform()) {
			return d, nil
		}
	}
	return descriptor{}, sandbox.Errorf(sandbox.CodeInvalidRequest,
		"no image for %s in the archive; it has %s", want, describeCandidates(cands))
}

// blobPath is where an OCI layout keeps the blob of digest.
func blobPath(digest string) (string, error) {
	algo, hexPart, _ := strings.Cut(digest, ":")
	want := map[string]int{"sha256": 64, "sha512": 128}[algo]
	if want == 0 || len(hexPart) != want || strings.Trim(hexPart, "0123456789abcdef") != "" {
		return "", sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid digest %q", digest)
	}
	return "blobs/" + algo + "/" + hexPart, nil
}

// openBlob opens the blob d names. Reading it to the end checks its size
// and digest: a mismatch is an INVALID_REQUEST_BODY error from Read. The
// caller closes it.
func openBlob(src source, d descriptor) (io.ReadCloser, error) {
	p, err := blobPath(d.Digest)
	if err != nil {
		return nil, err
	}
	r, err := src.open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s is missing from the archive", d.Digest)
	}
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", d.Digest, err)
	}
	var h hash.Hash = sha256.New()
	if strings.HasPrefix(d.Digest, "sha512:") {
		h = sha512.New()
	}
	return &verifier{r: r, h: h, digest: d.Digest, size: d.Size}, nil
}

// readBlob reads a small blob (a manifest, index or config) and checks it.
func readBlob(src source, d descriptor) ([]byte, error) {
	if d.Size > maxJSON {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s is too large (%d bytes)", d.Digest, d.Size)
	}
	r, err := openBlob(src, d)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJSON {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s is too large", d.Digest)
	}
	return b, nil
}

// readSmall reads a file of at most maxJSON bytes.
func readSmall(src source, name string) ([]byte, error) {
	r, err := src.open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s is missing from the archive", name)
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxJSON+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if len(b) > maxJSON {
		return nil, sandbox.Errorf(sandbox.CodeInvalidRequest, "%s is too large", name)
	}
	return b, nil
}

// verifier checks a blob's size and digest as it is read; at the end it
// returns io.EOF only when both match, and its error from then on.
type verifier struct {
	r      io.ReadCloser
	h      hash.Hash
	digest string
	size   int64
	n      int64
	err    error
}

func (v *verifier) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.h.Write(p[:n])
	if v.size > 0 && v.n > v.size {
		v.err = sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s is larger than its descriptor says (%d bytes)", v.digest, v.size)
		return n, v.err
	}
	if err == io.EOF {
		_, want, _ := strings.Cut(v.digest, ":")
		switch {
		case v.size > 0 && v.n != v.size:
			v.err = sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s has %d bytes, want %d", v.digest, v.n, v.size)
		case hex.EncodeToString(v.h.Sum(nil)) != want:
			v.err = sandbox.Errorf(sandbox.CodeInvalidRequest, "blob %s does not match its digest", v.digest)
		default:
			v.err = io.EOF
		}
		return n, v.err
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

func (v *verifier) Close() error { return v.r.Close() }
