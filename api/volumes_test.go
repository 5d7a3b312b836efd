package api_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/sandbox"
)

// volumeBackend is the process backend with named volumes kept in memory,
// for the API's volume routes.
type volumeBackend struct {
	sandbox.Provider
	mu   sync.Mutex
	vols map[string][]string // name -> users
}

func (b *volumeBackend) ListVolumes(context.Context) ([]sandbox.VolumeInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []sandbox.VolumeInfo
	for n, u := range b.vols {
		out = append(out, sandbox.VolumeInfo{Name: n, Backend: "vol", CreatedAt: time.Unix(1700000000, 0), InUse: u})
	}
	return out, nil
}

func (b *volumeBackend) DeleteVolume(_ context.Context, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	u, ok := b.vols[name]
	switch {
	case !ok:
		return sandbox.Errorf(sandbox.CodeNotFound, "volume %q not found", name)
	case len(u) > 0:
		return sandbox.Errorf(sandbox.CodeConflict, "volume %q is mounted by sandbox %s", name, u[0])
	}
	delete(b.vols, name)
	return nil
}

func TestVolumeRoutes(t *testing.T) {
	vb := &volumeBackend{vols: map[string][]string{"work": nil, "busy": {"sb1"}}}
	e := newEnvConfig(t, 0, nil, func(c *server.Config) {
		vb.Provider = c.Backends["process"]
		c.Backends["vol"] = vb
	})
	ctx := ctxT(t)
	vols, err := e.c.ListVolumes(ctx, "")
	if err != nil || len(vols) != 2 || vols[0].Name != "busy" || vols[0].Backend != "vol" || vols[0].InUse[0] != "sb1" || vols[1].CreatedAt == nil {
		t.Fatalf("list: %+v, %v", vols, err)
	}
	if vols, err := e.c.ListVolumes(ctx, "process"); err != nil || len(vols) != 0 {
		t.Fatalf("list of a backend without volumes: %+v, %v", vols, err)
	}
	for _, c := range []struct {
		backend, name string
		code          sandbox.Code
	}{
		{"", "busy", sandbox.CodeConflict}, {"", "nope", sandbox.CodeNotFound}, {"", "Bad_Name", sandbox.CodeInvalidRequest},
		{"nope", "work", sandbox.CodeInvalidRequest}, {"process", "work", sandbox.CodeNotFound},
	} {
		if err := e.c.DeleteVolume(ctx, c.backend, c.name); client.CodeOf(err) != c.code {
			t.Errorf("delete %s on %q: want %s, got %v", c.name, c.backend, c.code, err)
		}
	}
	if err := e.c.DeleteVolume(ctx, "", "work"); err != nil {
		t.Fatal(err)
	}
	if vols, _ := e.c.ListVolumes(ctx, "vol"); len(vols) != 1 {
		t.Fatalf("after delete: %+v", vols)
	}
}

// TestCreateWithVolumesRefused: the wire shapes the lifecycle API accepts
// for volumes, and what a backend without them answers.
func TestCreateWithVolumesRefused(t *testing.T) {
	e := newEnv(t, 0)
	cases := []struct {
		name, vols string
		code       sandbox.Code
		msg        string
	}{
		{"host on a backend without volumes", `[{"name":"v","host":{"path":"/tmp/x"},"mountPath":"/mnt/data","readOnly":false}]`, sandbox.CodeCapability, "persistent-workspace (volumes)"},
		{"pvc on a backend without volumes", `[{"name":"v","pvc":{"claimName":"c"},"mountPath":"/mnt/data"}]`, sandbox.CodeCapability, "persistent-workspace (volumes)"},
		{"ossfs", `[{"name":"v","ossfs":{"bucket":"b"},"mountPath":"/m"}]`, sandbox.CodeCapability, "ossfs"},
		{"two backends", `[{"name":"v","host":{"path":"/x"},"pvc":{"claimName":"c"},"mountPath":"/m"}]`, sandbox.CodeInvalidRequest, "exactly one"},
		{"no backend", `[{"name":"v","mountPath":"/m"}]`, sandbox.CodeInvalidRequest, "exactly one"},
		{"delete on termination", `[{"name":"v","pvc":{"claimName":"c","deleteOnSandboxTermination":true},"mountPath":"/m"}]`, sandbox.CodeCapability, "deleteOnSandboxTermination"},
		{"bad name", `[{"name":"V!","pvc":{"claimName":"c"},"mountPath":"/m"}]`, sandbox.CodeInvalidRequest, "volume name"},
		{"subPath escape", `[{"name":"v","pvc":{"claimName":"c"},"mountPath":"/m","subPath":"../etc"}]`, sandbox.CodeInvalidRequest, "'..'"},
		{"windows host path", `[{"name":"v","host":{"path":"C:\\data"},"mountPath":"/m"}]`, sandbox.CodeInvalidRequest, "absolute"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := `{"image":{"uri":"host"},"entrypoint":["sleep","infinity"],"volumes":` + c.vols + `}`
			req, _ := http.NewRequest("POST", e.srv.URL+"/v1/sandboxes", strings.NewReader(body))
			req.Header.Set("OPEN-SANDBOX-API-KEY", testKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var er wire.ErrorResponse
			_ = json.Unmarshal(b, &er)
			if resp.StatusCode != 400 || er.Code != string(c.code) || !strings.Contains(er.Message, c.msg) {
				t.Fatalf("got %d %s, want 400 %s with %q", resp.StatusCode, b, c.code, c.msg)
			}
		})
	}
}
