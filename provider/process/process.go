// Package process is a test-only sandbox backend: each box is an execd
// process on the host, in a directory of its own, with no isolation at all.
// It exists so that the execd contract and the conformance suite run fast
// and anywhere. It is never selectable from configuration.
package process

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/procfs"
	"github.com/astrabox/astrabox/sandbox"
)

// Config configures the harness.
type Config struct {
	// Dir holds one directory per box.
	Dir string
	// Command is the argv prefix that runs the astrabox binary; "execd"
	// and its flags are appended.
	Command []string
	// Env is added to the environment of every execd.
	Env []string
	// Logger receives operational logs.
	Logger *slog.Logger
}

// Provider runs boxes as host processes.
type Provider struct {
	cfg Config
	log *slog.Logger
	mu  sync.Mutex
	// procs holds the execd processes this Provider started, for Wait.
	procs map[string]*exec.Cmd
	// exits holds, by box id, how the execd processes this Provider
	// started ended (*exitStatus), for the reason of a box that died.
	exits sync.Map
}

// exitStatus is how a box's execd ended, once done is closed.
type exitStatus struct {
	done  chan struct{}
	state *os.ProcessState
}

// state is written to a box's directory so that List and Inspect work
// across Provider instances, and is the box's Info.StateBlob.
type state struct {
	Version   int       `json:"version"`
	PID       int       `json:"pid"`
	Token     string    `json:"token"`
	CreatedAt time.Time `json:"createdAt"`
}

// New returns a Provider that keeps boxes under cfg.Dir.
func New(cfg Config) (*Provider, error) {
	if cfg.Dir == "" || len(cfg.Command) == 0 {
		return nil, errors.New("process provider: Dir and Command are required")
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("process provider: %w", err)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Provider{cfg: cfg, log: cfg.Logger, procs: make(map[string]*exec.Cmd)}, nil
}

// Name implements sandbox.Provider.
func (p *Provider) Name() string { return "process" }

// Capabilities implements sandbox.Provider: no isolation, no limits.
func (p *Provider) Capabilities() sandbox.Capabilities {
	return sandbox.Capabilities{
		Isolation:    sandbox.IsolationNone,
		NetworkModes: []sandbox.NetworkMode{sandbox.NetworkUnrestricted},
		Ports:        true,
		PTY:          true,
	}
}

// Health implements sandbox.Provider.
func (p *Provider) Health(ctx context.Context) sandbox.Health {
	if _, err := os.Stat(p.cfg.Dir); err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: err.Error()}
	}
	return sandbox.Health{Status: sandbox.Healthy}
}

func (p *Provider) boxDir(id string) (string, error) {
	if err := validID(id); err != nil {
		return "", err
	}
	return filepath.Join(p.cfg.Dir, id), nil
}

func validID(id string) error {
	if id == "" || len(id) > 128 {
		return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
	}
	for _, c := range id {
		if !(c == '-' || c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
			return sandbox.Errorf(sandbox.CodeInvalidRequest, "invalid sandbox id %q", id)
		}
	}
	return nil
}

// Create implements sandbox.Provider. The Spec's image is ignored: a
// process box sees the host.
func (p *Provider) Create(ctx context.Context, id string, spec sandbox.Spec) (sandbox.Info, error) {
	if err := spec.Validate(); err != nil {
		return sandbox.Info{}, err
	}
	if err := p.Capabilities().Check(spec); err != nil {
		return sandbox.Info{}, err
	}
	dir, err := p.boxDir(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if info, err := p.inspect(id); err == nil && info.State == sandbox.StateRunning {
		return info, nil
	}
	info, err := p.start(ctx, id, dir, spec)
	if err != nil {
		p.remove(id, dir)
		return sandbox.Info{}, err
	}
	return info, nil
}

func (p *Provider) start(ctx context.Context, id, dir string, spec sandbox.Spec) (sandbox.Info, error) {
	workspace := filepath.Join(dir, "workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		return sandbox.Info{}, fmt.Errorf("create box dir: %w", err)
	}
	var tb [16]byte
	_, _ = rand.Read(tb[:])
	token := hex.EncodeToString(tb[:])
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return sandbox.Info{}, fmt.Errorf("write token: %w", err)
	}
	sock := filepath.Join(dir, "execd.sock")
	args := append(append([]string{}, p.cfg.Command[1:]...), "execd", "--listen", "", "--unix", sock,
		"--access-token-file", tokenFile, "--workdir", workspace, "--log-level", "warn")
	cmd := exec.Command(p.cfg.Command[0], args...)
	cmd.Dir = workspace
	cmd.Env = append(os.Environ(), p.cfg.Env...)
	cmd.Env = append(cmd.Env, "HOME="+workspace)
	for k, v := range spec.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logf, err := os.Create(filepath.Join(dir, "execd.log"))
	if err != nil {
		return sandbox.Info{}, fmt.Errorf("create execd log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return sandbox.Info{}, fmt.Errorf("start execd: %w", err)
	}
	st := state{Version: stateVersion, PID: cmd.Process.Pid, Token: token, CreatedAt: time.Now().UTC()}
	p.procs[id] = cmd
	exit := &exitStatus{done: make(chan struct{})}
	p.exits.Store(id, exit)
	go func() {
		_ = cmd.Wait()
		exit.state = cmd.ProcessState
		close(exit.done)
	}()
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(dir, "state.json"), b, 0o600); err != nil {
		return sandbox.Info{}, fmt.Errorf("write state: %w", err)
	}
	if err := waitSocket(ctx, sock); err != nil {
		return sandbox.Info{}, err
	}
	return p.info(id, st), nil
}

// waitSocket polls until the unix socket accepts a connection.
func waitSocket(ctx context.Context, path string) error {
	delay := 200 * time.Microsecond
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("execd did not start: %w", ctx.Err())
		case <-time.After(delay):
		}
		delay = min(delay*2, 20*time.Millisecond)
	}
}

func (p *Provider) info(id string, st state) sandbox.Info {
	b, _ := json.Marshal(st)
	info := sandbox.Info{ID: id, State: sandbox.StateRunning, CreatedAt: st.CreatedAt, AccessToken: st.Token, StateBlob: b}
	if !alive(st.PID) {
		info.State, info.Reason = sandbox.StateFailed, p.deathReason(id)
	}
	return info
}

// reapWait bounds how long deathReason waits for the reaper of an execd
// that is gone to record how it ended.
const reapWait = 5 * time.Second

// deathReason says how box id's execd ended (sandbox.ReasonExited): its
// exit code or signal when this Provider started it, and has reaped it.
func (p *Provider) deathReason(id string) string {
	how := "execd exited"
	if v, ok := p.exits.Load(id); ok {
		exit := v.(*exitStatus)
		select {
		case <-exit.done:
			if exit.state == nil {
				break // not reaped by this Provider after all
			}
			if ws, ok := exit.state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				how = fmt.Sprintf("execd was killed by signal %d (%s)", int(ws.Signal()), ws.Signal())
			} else {
				how = fmt.Sprintf("execd exited with exit code %d", exit.state.ExitCode())
			}
		case <-time.After(reapWait): // its reaper records it at once
		}
	}
	return sandbox.ReasonExited + ": " + how
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	return procfs.StartTime(pid) != 0 // a zombie is not alive
}

func (p *Provider) readState(id string) (state, error) {
	dir, err := p.boxDir(id)
	if err != nil {
		return state{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return state{}, fmt.Errorf("box %s: %w", id, sandbox.ErrNotFound)
	}
	if err != nil {
		return state{}, fmt.Errorf("read state: %w", err)
	}
	return decodeState(id, b)
}

func (p *Provider) inspect(id string) (sandbox.Info, error) {
	st, err := p.readState(id)
	if err != nil {
		return sandbox.Info{}, err
	}
	return p.info(id, st), nil
}

// Inspect implements sandbox.Provider.
func (p *Provider) Inspect(ctx context.Context, id string) (sandbox.Info, error) {
	return p.inspect(id)
}

// List implements sandbox.Provider.
func (p *Provider) List(ctx context.Context) ([]sandbox.Info, error) {
	entries, err := os.ReadDir(p.cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("list boxes: %w", err)
	}
	var out []sandbox.Info
	for _, e := range entries {
		if info, err := p.inspect(e.Name()); err == nil {
			out = append(out, info)
		}
	}
	return out, nil
}

// Delete implements sandbox.Provider: SIGTERM to execd (which kills what it
// started), SIGKILL to its group after 5 s, then the box directory goes.
func (p *Provider) Delete(ctx context.Context, id string) error {
	dir, err := p.boxDir(id)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.remove(id, dir)
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("box %s: directory still present", id)
	}
	return nil
}

func (p *Provider) remove(id, dir string) {
	if st, err := p.readState(id); err == nil && alive(st.PID) {
		_ = syscall.Kill(st.PID, syscall.SIGTERM)
		deadline := time.Now().Add(5 * time.Second)
		for alive(st.PID) && time.Now().Before(deadline) {
			time.Sleep(2 * time.Millisecond)
		}
		_ = syscall.Kill(-st.PID, syscall.SIGKILL)
		for alive(st.PID) {
			time.Sleep(2 * time.Millisecond)
		}
	}
	delete(p.procs, id)
	p.exits.Delete(id)
	_ = os.RemoveAll(dir)
}

// Pause implements sandbox.Provider: unsupported.
func (p *Provider) Pause(ctx context.Context, id string) error {
	return fmt.Errorf("pause: %w", sandbox.ErrUnsupported)
}

// Resume implements sandbox.Provider: unsupported.
func (p *Provider) Resume(ctx context.Context, id string) error {
	return fmt.Errorf("resume: %w", sandbox.ErrUnsupported)
}

// Dial implements sandbox.Provider: the box's unix socket.
func (p *Provider) Dial(ctx context.Context, id string) (net.Conn, error) {
	dir, err := p.boxDir(id)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", filepath.Join(dir, "execd.sock"))
	if err != nil {
		return nil, fmt.Errorf("dial box %s: %w", id, err)
	}
	return c, nil
}
