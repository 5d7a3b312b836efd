package image

import (
	"context"
	"io"
	"log"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/astrabox/astrabox/sandbox"
)

// testRegistry serves go-containerregistry's in-process registry on
// loopback and returns its host:port.
func testRegistry(t testing.TB) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func push(t testing.TB, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

func TestPull(t *testing.T) {
	host := testRegistry(t)
	ctx := context.Background()

	rnd, err := random.Image(512, 3)
	if err != nil {
		t.Fatal(err)
	}
	push(t, host+"/test/random:v1", rnd)
	built := ggcrImage(t, tarOfEntries(t, baseEntries...), tarOfEntries(t, topEntries...))
	push(t, host+"/library/app:2.0", built)
	other := ggcrImage(t, tarOfEntries(t, reg("arch", "arm64")))
	idx := mutate.AppendManifests(empty.Index,
		mutate.IndexAddendum{Add: other, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: built, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}})
	r, _ := name.ParseReference(host + "/multi:latest")
	if err := remote.WriteIndex(r, idx); err != nil {
		t.Fatal(err)
	}
	builtDigest, _ := built.Digest()
	rndDigest, _ := rnd.Digest()

	s := openStore(t, t.TempDir())
	t.Run("random image, name from the reference", func(t *testing.T) {
		info, err := s.Pull(ctx, host+"/test/random:v1", "", PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "random:v1" || info.Layers != 3 || info.Digest != rndDigest.String() || info.Format != FormatRegistry {
			t.Errorf("info %+v", info)
		}
		if info.Size == 0 {
			t.Error("no content")
		}
	})
	t.Run("built image with config", func(t *testing.T) {
		info, err := s.Pull(ctx, host+"/library/app:2.0", "app", PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.Name != "app:latest" || info.Digest != builtDigest.String() || info.Source != host+"/library/app:2.0" {
			t.Errorf("info %+v", info)
		}
		checkTwoLayers(t, info.RootFS)
		if info.Config == nil || !slices.Equal(info.Config.Env, []string{"PATH=/bin", "A=1"}) || info.Config.WorkingDir != "/work" {
			t.Errorf("config %+v", info.Config)
		}
	})
	t.Run("index picks linux/amd64", func(t *testing.T) {
		info, err := s.Pull(ctx, host+"/multi", "multi", PullOptions{ImportOptions: ImportOptions{Platform: "linux/amd64"}})
		if err != nil {
			t.Fatal(err)
		}
		if info.Digest != builtDigest.String() || exists(filepath.Join(info.RootFS, "arch")) {
			t.Errorf("pulled %s, want the amd64 image %s", info.Digest, builtDigest)
		}
	})
	t.Run("by digest", func(t *testing.T) {
		info, err := s.Pull(ctx, host+"/library/app@"+builtDigest.String(), "", PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if want := "app:sha256-" + builtDigest.Hex; info.Name != want {
			t.Errorf("name %q, want %q", info.Name, want)
		}
	})
	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			ref, name string
			opts      PullOptions
			code      sandbox.Code
		}{
			{host + "/library/app:2.0", "app", PullOptions{}, sandbox.CodeAlreadyExists},
			{host + "/nothing:here", "", PullOptions{}, sandbox.CodeImageNotFound},
			{host + "/multi", "m2", PullOptions{ImportOptions: ImportOptions{Platform: "linux/s390x"}}, sandbox.CodeImageNotFound},
			{"UPPER/Case::x", "", PullOptions{}, sandbox.CodeInvalidRequest},
			{host + "/library/app:2.0", "host", PullOptions{}, sandbox.CodeInvalidRequest},
			{host + "/test/random:v1", "small", PullOptions{ImportOptions: ImportOptions{MaxBytes: 100}}, sandbox.CodePayloadTooLarge},
		}
		for _, tt := range tests {
			_, err := s.Pull(ctx, tt.ref, tt.name, tt.opts)
			if sandbox.CodeOf(err) != tt.code {
				t.Errorf("Pull(%q, %q): %v, want %s", tt.ref, tt.name, err, tt.code)
			}
		}
	})
	t.Run("replace", func(t *testing.T) {
		info, err := s.Pull(ctx, host+"/test/random:v1", "app", PullOptions{ImportOptions: ImportOptions{Replace: true}})
		if err != nil || info.Digest != rndDigest.String() {
			t.Fatalf("%+v, %v", info, err)
		}
	})
	if es := storeEntries(t, s); !slices.Equal(es, []string{".retired", "app+latest", "app+sha256-" + builtDigest.Hex, "multi+latest", "random+v1"}) {
		t.Errorf("store holds %v", es)
	}
}

func TestPullUnreachable(t *testing.T) {
	srv := httptest.NewServer(nil)
	host := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens there now
	s := openStore(t, t.TempDir())
	_, err := s.Pull(context.Background(), host+"/x:1", "", PullOptions{})
	wantCode(t, err, sandbox.CodeUpstreamUnreachable)
}
