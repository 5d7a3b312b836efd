package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
)

// engineProxy forwards a unix socket to the Docker Engine's; stopping it
// is, for whoever dials the proxy, the engine going away.
type engineProxy struct {
	path  string
	mu    sync.Mutex
	l     net.Listener
	conns map[net.Conn]bool
}

func (p *engineProxy) start(t *testing.T) {
	t.Helper()
	l, err := net.Listen("unix", p.path)
	if err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	p.l, p.conns = l, map[net.Conn]bool{}
	p.mu.Unlock()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("unix", testenv.DockerSocket)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns[c], p.conns[up] = true, true
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); up.Close() }()
			go func() { _, _ = io.Copy(c, up); c.Close() }()
		}
	}()
}

func (p *engineProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.l != nil {
		p.l.Close()
		p.l = nil
	}
	for c := range p.conns {
		c.Close()
	}
	p.conns = nil
	os.Remove(p.path)
}

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// readiness returns /readyz's status and its backends' statuses (detail
// the server gives authenticated requests only; the key is "k").
func readiness(t *testing.T, base string) (int, map[string]sandbox.Health) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/readyz", nil)
	req.Header.Set(api.HeaderAPIKey, "k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Backends map[string]sandbox.Health `json:"backends"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body.Backends
}

// TestNativeAndDockerTogether serves both backends from one server: each
// creates and runs sandboxes; when the engine goes away only the docker
// backend turns unready (and says why) while native keeps serving; when
// it returns, the docker sandbox is still there.
func TestNativeAndDockerTogether(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const img = "astrabox-test/app:debian"
	f, err := os.Open(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	err = docker.ImportRootfs(ctx, docker.Config{}, img, f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}

	dir, err := os.MkdirTemp("", "astrabox-app-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	bin := testenv.AstraboxBinary(t)
	log := slog.New(slog.DiscardHandler)
	nat, err := native.New(native.Config{DataDir: filepath.Join(dir, "native"), Binary: bin, CgroupParent: fmt.Sprintf("astrabox-apptest-%d", os.Getpid()), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer nat.Close()
	proxy := &engineProxy{path: filepath.Join(dir, "engine.sock")}
	proxy.start(t)
	defer proxy.stop()
	dock, err := docker.New(docker.Config{DataDir: filepath.Join(dir, "docker"), Binary: bin, Host: "unix://" + proxy.path, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer dock.Close()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "astrabox.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	svc, err := lifecycle.New(lifecycle.Config{Store: st, Backends: map[string]sandbox.Provider{"native": nat, "docker": dock},
		DefaultBackend: "native", Logger: log,
		Profiles: map[string]lifecycle.Profile{"deb": {Backend: "docker", Image: img}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Service: svc, Store: st, APIKeyHash: api.HashKey("k"), Logger: log}))
	defer srv.Close()
	c := client.New(srv.URL, "k")
	defer func() {
		list, _ := c.List(context.Background(), client.ListOptions{PageSize: 100})
		for _, sb := range list.Items {
			_ = c.Delete(context.Background(), sb.ID)
		}
	}()

	run := func(id, command string) (string, error) {
		x, err := c.Execd(ctx, id)
		if err != nil {
			return "", err
		}
		ex, err := x.Run(ctx, execdwire.RunCommandRequest{Command: command})
		if err != nil {
			return "", err
		}
		return string(ex.Stdout), nil
	}
	create := func(ext map[string]string) (*wire.Sandbox, error) {
		return c.Create(ctx, wire.CreateSandboxRequest{Extensions: ext}, client.CreateOptions{})
	}

	if code, b := readiness(t, srv.URL); code != http.StatusOK {
		t.Fatalf("readyz with both backends up: %d %+v", code, b)
	}
	onNative, err := create(map[string]string{"backend": "native"})
	if err != nil {
		t.Fatal(err)
	}
	onDocker, err := create(map[string]string{"profile": "deb"})
	if err != nil {
		t.Fatal(err)
	}
	if onNative.Backend != "native" || onDocker.Backend != "docker" {
		t.Fatalf("backends %q and %q", onNative.Backend, onDocker.Backend)
	}
	if out, err := run(onDocker.ID, "grep -h ^ID= /etc/os-release"); err != nil || out != "ID=debian\n" {
		t.Fatalf("docker sandbox: %q %v", out, err)
	}

	// The engine goes away.
	proxy.stop()
	code, b := readiness(t, srv.URL)
	if code != http.StatusServiceUnavailable || b["docker"].Status == sandbox.Healthy || b["docker"].Reason == "" || b["native"].Status != sandbox.Healthy {
		t.Fatalf("readyz without the engine: %d %+v; want 503 naming docker only", code, b)
	}
	if _, err := create(map[string]string{"profile": "deb"}); err == nil {
		t.Fatal("a docker create succeeded without an engine")
	}
	again, err := create(map[string]string{"backend": "native"})
	if err != nil {
		t.Fatalf("native create while the engine is away: %v", err)
	}
	if out, err := run(again.ID, "echo native-serves"); err != nil || out != "native-serves\n" {
		t.Fatalf("native exec while the engine is away: %q %v", out, err)
	}

	// The engine returns: ready again, and the docker sandbox was kept.
	proxy.start(t)
	if code, b := readiness(t, srv.URL); code != http.StatusOK {
		t.Fatalf("readyz after the engine returned: %d %+v", code, b)
	}
	if out, err := run(onDocker.ID, "echo still-here"); err != nil || out != "still-here\n" {
		t.Fatalf("docker sandbox after the engine returned: %q %v", out, err)
	}
	var failed []string
	for _, sb := range []*wire.Sandbox{onNative, onDocker, again} {
		if err := c.Delete(ctx, sb.ID); err != nil {
			failed = append(failed, err.Error())
		}
	}
	if len(failed) > 0 {
		t.Fatal(errors.New(strings.Join(failed, "; ")))
	}
	if boxes, err := dock.List(ctx); err != nil || len(boxes) != 0 {
		t.Fatalf("docker boxes left: %v %v", boxes, err)
	}
}
