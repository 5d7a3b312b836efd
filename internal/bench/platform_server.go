package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/server"
	"github.com/astrabox/astrabox/lifecycle"
	"github.com/astrabox/astrabox/platform/wire"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/provider/process"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/store/sqlite"
	"github.com/astrabox/astrabox/vault"
)

// Names of what the platform bench stores in its server.
const (
	benchAPIKey   = "bench-api-key"
	benchModelKey = "sk-bench-model-key"
	coldProfile   = "bench-cold" // no warm pool
	poolProfile   = "bench-pool" // a warm pool of PlatformConfig.PoolSize
)

// platformEnv is one in-process AstraBox server of the platform bench:
// the wiring of internal/server on a fresh SQLite store (wrapped to note
// commit times), one backend, a throwaway vault, served on loopback, with
// two Agents on the bench model: one whose profile has no pool, one whose
// profile keeps a warm pool.
type platformEnv struct {
	backend   string
	srv       *server.Server
	url       string
	hc        *http.Client
	model     *benchModel
	commits   *commitLog
	coldAgent string
	poolAgent string
	// piAgent is an Agent of engine kind pi on a profile without a pool
	// ("" when the bench has no pi image).
	piAgent string
	close   func()
}

// startPlatform builds and starts the server of backend with its state
// under dir. The caller calls env.close, which also deletes every box.
func startPlatform(ctx context.Context, cfg PlatformConfig, backend, dir string, model *benchModel) (*platformEnv, error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	fail := func(err error) (*platformEnv, error) {
		closeAll()
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o711); err != nil {
		return nil, fmt.Errorf("bench: scratch dir: %w", err)
	}
	st, err := sqlite.Open(ctx, filepath.Join(dir, "astrabox.db"))
	if err != nil {
		return nil, err
	}
	closers = append(closers, func() { _ = st.Close() })
	var images func(string) (string, error)
	if cfg.PiRootfs != "" && backend == "native" {
		if images, err = importPi(ctx, cfg.PiRootfs, filepath.Join(dir, "images"), cfg.Logger); err != nil {
			return fail(err)
		}
	}
	prov, err := benchProvider(backend, cfg.Binary, dir, images, cfg.Logger)
	if err != nil {
		return fail(err)
	}
	closers = append(closers, func() {
		del, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		boxes, _ := prov.List(del)
		for _, b := range boxes {
			_ = prov.Delete(del, b.ID)
		}
		if c, ok := prov.(io.Closer); ok {
			_ = c.Close()
		}
	})
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return fail(fmt.Errorf("bench: vault key: %w", err))
	}
	ring, err := vault.New(key)
	if err != nil {
		return fail(fmt.Errorf("bench: vault: %w", err))
	}
	commits := newCommitLog()
	srv, err := server.New(server.Config{Store: &timedStore{Store: st, commits: commits},
		Backends: map[string]sandbox.Provider{backend: prov}, DefaultBackend: backend, Installed: []string{backend},
		APIKeyHash: api.HashKey(benchAPIKey), Vault: ring, Logger: cfg.Logger})
	if err != nil {
		return fail(fmt.Errorf("bench: wire the server: %w", err))
	}
	runCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	if err := srv.Start(runCtx); err != nil {
		stop()
		return fail(fmt.Errorf("bench: start the server: %w", err))
	}
	closers = append(closers, func() { srv.Close(); stop() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(fmt.Errorf("bench: listen: %w", err))
	}
	hs := srv.HTTPServer()
	go func() { _ = hs.Serve(ln) }()
	closers = append(closers, func() { _ = hs.Close() })

	tr := &http.Transport{Proxy: nil, MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: time.Minute}
	closers = append(closers, tr.CloseIdleConnections)
	e := &platformEnv{backend: backend, srv: srv, url: "http://" + ln.Addr().String(), hc: &http.Client{Transport: tr},
		model: model, commits: commits, close: closeAll}
	if e.coldAgent, err = e.setup(ctx, coldProfile, 0); err != nil {
		return fail(err)
	}
	if e.poolAgent, err = e.setup(ctx, poolProfile, cfg.PoolSize); err != nil {
		return fail(err)
	}
	if images != nil {
		if e.piAgent, err = e.setupPi(ctx); err != nil {
			return fail(err)
		}
	}
	return e, nil
}

// benchProvider makes the named backend with its state under dir.
// images, for native, resolves image names other than host (nil: none).
func benchProvider(backend, binary, dir string, images func(string) (string, error), log *slog.Logger) (sandbox.Provider, error) {
	switch backend {
	case "process":
		p, err := process.New(process.Config{Dir: filepath.Join(dir, "boxes"), Command: []string{binary}})
		if err != nil {
			return nil, fmt.Errorf("bench: process backend: %w", err)
		}
		return p, nil
	case "native":
		section := backends.NativeConfig{CgroupParent: fmt.Sprintf("astrabox-bench-%d", os.Getpid())}
		p, err := backends.Config{Native: section}.Open("native", backends.Env{DataDir: dir, Binary: binary, Logger: log,
			NativeOverride: func(c *native.Config) { c.Images = images }})
		if err != nil {
			return nil, fmt.Errorf("bench: native backend: %w", err)
		}
		return p, nil
	}
	return nil, fmt.Errorf("bench: unknown backend %q (known: process, native)", backend)
}

// setup stores RuntimeProfile name (the env's backend, the bench model, a
// warm pool of poolSize) and an Agent on it, and returns the agent's id.
func (e *platformEnv) setup(ctx context.Context, name string, poolSize int) (string, error) {
	_, err := e.srv.Catalog.PutRuntimeProfile(ctx, lifecycle.Profile{Name: name, Backend: e.backend, PoolSize: poolSize,
		EngineKinds: []string{"astrabox"},
		Model:       &lifecycle.ModelEndpoint{BaseURL: e.model.URL(), APIKey: benchModelKey, Models: []string{"bench-1"}}})
	if err != nil {
		return "", fmt.Errorf("bench: runtime profile %s: %w", name, err)
	}
	a, err := e.srv.Catalog.CreateAgent(ctx, wire.AgentRequest{Name: name, EngineKind: "astrabox", RuntimeProfile: name,
		Model: "bench-1", Instructions: "Be brief.", PermissionMode: "auto"})
	if err != nil {
		return "", fmt.Errorf("bench: agent on %s: %w", name, err)
	}
	return a.ID, nil
}

// call makes an API request with a JSON body (nil: none) and decodes a
// JSON answer into out (nil: discarded); a status other than want is an
// error quoting the answer.
func (e *platformEnv) call(ctx context.Context, want int, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	req.Header.Set(api.HeaderAPIKey, benchAPIKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode != want {
		return fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, strings.TrimSpace(string(b)))
	}
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("%s %s: decode: %w", method, path, err)
		}
	}
	return nil
}

// newSession opens a conversation with agentID (its runtime starts
// building at once) and returns its id.
func (e *platformEnv) newSession(ctx context.Context, agentID string) (string, error) {
	var s struct {
		ID string `json:"session_id"`
	}
	if err := e.call(ctx, http.StatusCreated, "POST", "/api/v1/agents/"+agentID+"/conversations", map[string]any{"title": "bench"}, &s); err != nil {
		return "", err
	}
	return s.ID, nil
}

// send posts an input to the session and returns its receipt's seq.
func (e *platformEnv) send(ctx context.Context, sid, content string) (int64, error) {
	var rc struct {
		Seq int64 `json:"seq"`
	}
	err := e.call(ctx, http.StatusCreated, "POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": content}, &rc)
	return rc.Seq, err
}

// deleteSession deletes the session and releases its sandbox.
func (e *platformEnv) deleteSession(ctx context.Context, sid string) error {
	return e.call(ctx, http.StatusNoContent, "DELETE", "/api/v1/sessions/"+sid, nil, nil)
}

// waitState polls the session, every 5 ms for at most timeout, until it
// is in state.
func (e *platformEnv) waitState(ctx context.Context, sid, state string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var s wire.Session
	for {
		if err := e.call(ctx, http.StatusOK, "GET", "/api/v1/sessions/"+sid, nil, &s); err != nil {
			return err
		}
		if string(s.State) == state {
			return nil
		}
		if s.State == wire.SessionRecoveryRequired || s.State == wire.SessionDeleted {
			return fmt.Errorf("session %s is %s, want %s", sid, s.State, state)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %s is %s after %s, want %s", sid, s.State, timeout, state)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}
