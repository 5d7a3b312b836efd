// Package servertest starts a whole AstraBox server for tests: the wiring
// of internal/server on a fresh SQLite store, a backend (the process
// harness by default, native for root tests), a throwaway vault and a
// scripted fake model, served over loopback HTTP.
package servertest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/api/identityapi"
	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/image"
	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/platform/engine"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// Key is the API key of every test server.
const Key = "test-api-key"

// ModelKey is the key the fake model demands; it must never reach a box.
const ModelKey = "sk-real-model-key-0123456789"

// Options configure New.
type Options struct {
	// Backend is "process" (default), "native" (needs root) or "docker"
	// (needs root, a Docker Engine and a rootfs tarball named by
	// ASTRABOX_TEST_ROOTFS, imported once per engine).
	Backend string
	// Script is the fake model's replies.
	Script []fakemodel.Reply
	// Store is used instead of a new SQLite store (the caller closes it).
	Store store.Store
	// Rootfs, for the native and docker backends, is a root file system
	// tarball that boxes start from instead of the backend's default
	// image: imported once per file (into a store kept in the temporary
	// directory across runs, or the Docker Engine) and named by Env.Image.
	Rootfs string
	// Egress, for the native backend, runs the egress proxies of network
	// limited (nil: the mode is not offered); the server delivers vault
	// secrets through it.
	Egress *egress.Manager
	// LogTo, when set, gets every line the server and the backend log, at
	// debug level (tests that check what never reaches a log).
	LogTo io.Writer
	// Web offers browser sign-in through an OpenID Connect provider
	// (server.Config.Web; nil: API keys only). Its provider's redirect URL
	// must be on the server's URL: give Listener to know it beforehand.
	Web *identityapi.Web
	// Listener, when set, is where the server first listens (a listener
	// opened before New, so that its URL is known to what New needs, such
	// as an identity provider's redirect URL); Env.Start takes it once, a
	// restarted server listens on a new port.
	Listener net.Listener
	// ShutdownGrace is how long a stopping server lets replies in progress
	// finish (server.Config.ShutdownGrace; zero: its default). A tiny one
	// makes Restart cut them, as a crash does.
	ShutdownGrace time.Duration
}

// engines is the servers' engine registry: every kind AstraBox ships,
// those that need an image told to use the Env's when it has one.
func engines(image string) engine.Registry {
	r := server.Engines()
	for kind, ad := range r {
		if image != "" && ad.Descriptor().Image != "" {
			r[kind] = engine.WithImage(ad, image)
		}
	}
	return r
}

// Env is a running test server.
type Env struct {
	t       testing.TB
	Backend string
	// Image is what profiles of the Env's backend name ("": its default).
	Image string
	Store store.Store
	Prov  sandbox.Provider
	Ring  *vault.Ring
	// MasterKey is the raw key of Ring as New made it.
	MasterKey []byte
	// Egress is Options.Egress.
	Egress *egress.Manager
	Server *server.Server
	Model  *fakemodel.Server
	URL    string
	hs     *httptest.Server
	cancel context.CancelFunc
	logTo  io.Writer
	web    *identityapi.Web
	grace  time.Duration
	// listener is Options.Listener until Start takes it.
	listener net.Listener
	// rebuild makes the backend anew on its data dir with an egress proxy,
	// for RestartBackend (nil for the process harness).
	rebuild func(*egress.Manager) (sandbox.Provider, error)
}

// New starts a server; t's cleanup stops it and removes every box.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	if o.Backend == "" {
		o.Backend = "process"
	}
	st := o.Store
	if st == nil {
		s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "astrabox.db"))
		if err != nil {
			t.Fatal(err)
		}
		st = s
		t.Cleanup(func() { s.Close() })
	}
	var (
		prov    sandbox.Provider
		image   string // the image profiles name ("" for the backend's default)
		rebuild func(*egress.Manager) (sandbox.Provider, error)
	)
	switch o.Backend {
	case "process":
		p, err := process.New(process.Config{Dir: t.TempDir(), Command: []string{testenv.AstraboxBinary(t)}})
		if err != nil {
			t.Fatal(err)
		}
		prov = p
	case "native":
		testenv.NeedRoot(t)
		dir, err := os.MkdirTemp("", "abx-native-")
		if err != nil {
			t.Fatal(err)
		}
		var images func(string) (string, error)
		if o.Rootfs != "" {
			images, image = nativeImage(t, o.Rootfs)
		}
		bin, lg := testenv.AstraboxBinary(t), logger(t, o.LogTo)
		// Opened as serve opens it, with the state in dir itself and the
		// test images.
		rebuild = func(m *egress.Manager) (sandbox.Provider, error) {
			return backends.Config{}.Open("native", backends.Env{DataDir: dir, Binary: bin, Egress: m, Logger: lg,
				NativeOverride: func(c *native.Config) { c.DataDir, c.Images = dir, images }})
		}
		p, err := rebuild(o.Egress)
		if err != nil {
			t.Fatal(err)
		}
		prov = p
		t.Cleanup(func() {
			_ = backends.Release(p)
			_ = os.RemoveAll(dir)
		})
	case "docker":
		p, img, open := dockerProvider(t, o.Egress)
		prov, image, rebuild = p, img, open
		if o.Rootfs != "" {
			image = dockerImport(t, p, o.Rootfs)
		}
	default:
		t.Fatalf("servertest: unknown backend %q", o.Backend)
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, _ := vault.New(key)
	e := &Env{t: t, Backend: o.Backend, Image: image, Store: st, Prov: prov, Ring: ring, MasterKey: key, Egress: o.Egress,
		Model: fakemodel.New(t, o.Script...).WithKey(ModelKey), logTo: o.LogTo, web: o.Web, listener: o.Listener, rebuild: rebuild,
		grace: o.ShutdownGrace}
	e.Start()
	t.Cleanup(func() {
		e.Stop()
		boxes, _ := prov.List(context.Background())
		for _, b := range boxes {
			_ = prov.Delete(context.Background(), b.ID)
		}
	})
	return e
}

// Start builds and starts a server on the Env's store and backend.
func (e *Env) Start() {
	e.t.Helper()
	if e.Prov == nil {
		return // attached
	}
	srv, err := server.New(server.Config{Store: e.Store, Backends: map[string]sandbox.Provider{e.Backend: e.Prov},
		DefaultBackend: e.Backend, Installed: []string{e.Backend}, APIKeyHash: api.HashKey(Key), Vault: e.Ring, Engines: engines(e.Image),
		ReconcileInterval: time.Second, LeaseTTL: 3 * time.Second, Egress: e.Egress, Web: e.web, Logger: logger(e.t, e.logTo),
		ShutdownGrace: e.grace})
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e.Server, e.cancel = srv, cancel
	e.hs = httptest.NewUnstartedServer(srv.Handler)
	if e.listener != nil {
		e.hs.Listener.Close()
		e.hs.Listener, e.listener = e.listener, nil
	}
	e.hs.Start()
	e.URL = e.hs.URL
	if err := srv.Start(ctx); err != nil {
		e.t.Fatal(err)
	}
}

// Stop closes the server; boxes and programs keep running.
func (e *Env) Stop() {
	if e.hs == nil {
		return
	}
	e.hs.CloseClientConnections()
	e.hs.Close()
	e.Server.Close()
	e.cancel()
	e.hs = nil
}

// Restart stops the server and starts a new one on the same store.
func (e *Env) Restart() {
	e.Stop()
	e.Start()
}

// RestartBackend restarts the server as a new `astrabox serve` process
// would find things: it stops the server, closes its egress proxy (the
// boxes' proxies with it) and starts a server on a new backend of the same
// data dir with m, an egress proxy that holds nothing yet. Only for the
// native and docker backends; boxes keep running throughout.
func (e *Env) RestartBackend(m *egress.Manager) {
	e.t.Helper()
	if e.rebuild == nil {
		e.t.Fatal("servertest: RestartBackend needs the native or docker backend")
	}
	e.Stop()
	if e.Egress != nil {
		e.Egress.Close()
	}
	p, err := e.rebuild(m)
	if err != nil {
		e.t.Fatal(err)
	}
	if c, ok := p.(interface{ Close() error }); ok {
		e.t.Cleanup(func() { _ = c.Close() })
	}
	e.Prov, e.Egress = p, m
	e.Start()
}

// Call makes an API request and decodes a JSON answer into out (when not
// nil); it returns the status. hdr are header name, value pairs.
func (e *Env) Call(method, path string, body, out any, hdr ...string) int {
	e.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, e.URL+path, rd)
	req.Header.Set(api.HeaderAPIKey, Key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// Must is Call that fails the test on another status than want.
func (e *Env) Must(want int, method, path string, body, out any, hdr ...string) {
	e.t.Helper()
	var raw json.RawMessage
	got := e.Call(method, path, body, &raw, hdr...)
	if got != want {
		e.t.Fatalf("%s %s = %d %s, want %d", method, path, got, raw, want)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			e.t.Fatal(err)
		}
	}
}

// Agent stores RuntimeProfile "test" on the Env's backend with the fake
// model (profile adds or overrides fields) and an Agent of the built-in
// engine kind on it with permission mode mode; it returns the agent id.
func (e *Env) Agent(mode string, profile map[string]any) string {
	e.t.Helper()
	return e.AgentOf("astrabox", mode, profile)
}

// AgentOf is Agent for an Agent of engine kind kind.
func (e *Env) AgentOf(kind, mode string, profile map[string]any) string {
	e.t.Helper()
	p := map[string]any{"backend": e.Backend, "engine_kinds": []string{kind},
		"model": map[string]any{"base_url": e.Model.URL(), "api_key": ModelKey, "models": []string{"fake-1"}}}
	if e.Image != "" {
		p["image"] = e.Image
	}
	for k, v := range profile {
		p[k] = v
	}
	e.Must(200, "PUT", "/api/v1/runtime-profiles/test", p, nil)
	var a struct {
		ID string `json:"agent_id"`
	}
	e.Must(201, "POST", "/api/v1/agents", map[string]any{"name": "coder", "engine_kind": kind, "runtime_profile": "test",
		"model": "fake-1", "permission_mode": mode, "instructions": "Be brief."}, &a)
	return a.ID
}

// Session opens a conversation with an agent.
func (e *Env) Session(agentID string) string {
	e.t.Helper()
	var s struct {
		ID string `json:"session_id"`
	}
	e.Must(201, "POST", "/api/v1/agents/"+agentID+"/conversations", map[string]any{"title": "t"}, &s)
	return s.ID
}

// logger logs to the test at debug level when ASTRABOX_TEST_DEBUG is set,
// and at warn otherwise; and to also (when not nil) at debug level.
func logger(t testing.TB, also ...io.Writer) *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("ASTRABOX_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	h := []slog.Handler{slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: level})}
	for _, w := range also {
		if w != nil {
			h = append(h, slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
	}
	return slog.New(slog.NewMultiHandler(h...))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// Attach returns an Env for a server that runs elsewhere (an `astrabox
// serve` process a test started) at url with API key Key, whose boxes run
// on backend and call model. Start, Stop and Restart do nothing on it.
func Attach(t testing.TB, url, backend string, model *fakemodel.Server) *Env {
	return &Env{t: t, URL: url, Backend: backend, Model: model}
}

// DockerImage returns the name of the test image in the local Docker
// Engine (the ASTRABOX_TEST_ROOTFS tarball, imported once per engine).
func DockerImage(t testing.TB) string {
	_, name, _ := dockerProvider(t, nil)
	return name
}

// dockerProvider returns a docker backend on a fresh data dir with a
// unique owner, and the test image (the rootfs tarball named by
// ASTRABOX_TEST_ROOTFS, imported under a tag derived from the file so that
// later runs reuse it); eg, when not nil, serves its boxes of network
// limited. It returns what opens the backend anew on the same data dir
// too.
func dockerProvider(t testing.TB, eg *egress.Manager) (*docker.Provider, string, func(*egress.Manager) (sandbox.Provider, error)) {
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "ASTRABOX_TEST_ROOTFS (a rootfs tarball with bash and python3)")
	dir, err := os.MkdirTemp("", "abx-docker-")
	if err != nil {
		t.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	section := backends.DockerConfig{Owner: "astrabox-test-" + hex.EncodeToString(b[:])}
	bin, lg := testenv.AstraboxBinary(t), logger(t)
	// Opened as serve opens it, with the state in dir itself and the
	// engine the local one whatever the environment says.
	open := func(m *egress.Manager) (sandbox.Provider, error) {
		return backends.Config{Docker: section}.Open("docker", backends.Env{DataDir: dir, Binary: bin, Egress: m, Logger: lg,
			DockerOverride: func(c *docker.Config) { c.DataDir, c.FromEnv = dir, false }})
	}
	prov, err := open(eg)
	if err != nil {
		t.Fatal(err)
	}
	p := prov.(*docker.Provider)
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close docker provider: %v", err)
		}
		_ = os.RemoveAll(dir)
	})
	return p, dockerImport(t, p, rootfs), open
}

// fileTag names a file's current content cheaply: a hash of its path,
// size and modification time.
func fileTag(t testing.TB, path string) string {
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s %d %d", path, fi.Size(), fi.ModTime().UnixNano()))
	return hex.EncodeToString(sum[:6])
}

// pathTag names a file by its absolute path alone (what stays when the
// file is rebuilt), as fileTag names its content.
func pathTag(t testing.TB, path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:6])
}

// dockerImport loads a rootfs tarball into the engine under a tag derived
// from the file, unless an earlier run did, and returns the image name.
// The tag imported last for the file's path is kept in a marker file in
// the temporary directory; the image it names is removed when the
// tarball changed, so that the engine keeps one test image per tarball.
func dockerImport(t testing.TB, p *docker.Provider, rootfs string) string {
	name := "astrabox-test/rootfs:" + fileTag(t, rootfs)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if ok, err := p.HasImage(ctx, name); err != nil {
		t.Fatal(err)
	} else if !ok {
		f, err := os.Open(rootfs)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := p.ImportRootfs(ctx, name, f); err != nil {
			t.Fatalf("import %s: %v", rootfs, err)
		}
		marker := filepath.Join(os.TempDir(), "astrabox-test-docker-images", pathTag(t, rootfs))
		if prev, err := os.ReadFile(marker); err == nil && string(prev) != name {
			if err := p.RemoveImage(ctx, string(prev)); err != nil {
				t.Logf("remove the outdated test image %s: %v", prev, err)
			}
		}
		if err := os.MkdirAll(filepath.Dir(marker), 0o700); err == nil {
			_ = os.WriteFile(marker, []byte(name), 0o600)
		}
	}
	return name
}

// nativeImage imports a rootfs tarball into an image store kept in the
// temporary directory, unless an earlier run did, and returns the store's
// resolver and the image name: repository "rootfs-" plus a hash of the
// file's path, tagged with a hash of its size and modification time. An
// earlier tag of the same path (the tarball was rebuilt) is removed, so
// that the store holds one image per tarball however often it changes.
func nativeImage(t testing.TB, rootfs string) (func(string) (string, error), string) {
	st, err := image.Open(filepath.Join(os.TempDir(), "astrabox-test-images"), logger(t))
	if err != nil {
		t.Fatal(err)
	}
	repo := "rootfs-" + pathTag(t, rootfs)
	name := repo + ":" + fileTag(t, rootfs)
	if _, err := st.Resolve(name); sandbox.CodeOf(err) == sandbox.CodeImageNotFound {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		if _, err := st.Import(ctx, name, rootfs, image.ImportOptions{}); err != nil && sandbox.CodeOf(err) != sandbox.CodeAlreadyExists {
			t.Fatalf("import %s: %v", rootfs, err)
		}
		removeOtherTags(ctx, t, st, repo, name)
	} else if err != nil {
		t.Fatal(err)
	}
	return st.Resolve, name
}

// removeOtherTags removes the images of repo in st other than keep.
func removeOtherTags(ctx context.Context, t testing.TB, st *image.Store, repo, keep string) {
	images, err := st.List(ctx)
	if err != nil {
		t.Logf("list test images: %v", err)
		return
	}
	for _, info := range images {
		if strings.HasPrefix(info.Name, repo+":") && info.Name != keep {
			if err := st.Remove(ctx, info.Name); err != nil {
				t.Logf("remove the outdated test image %s: %v", info.Name, err)
			}
		}
	}
}
