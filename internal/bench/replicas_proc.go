package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/boxbin"
)

// replicaProc is one `astrabox serve` replica of the replicas bench: the
// binary itself as a child process with its own data dir, on the shared
// scratch database, with the native backend.
type replicaProc struct {
	name    string
	bin     string
	dir     string
	addr    string
	args    []string
	cgroup  string
	cmd     *exec.Cmd
	exited  chan struct{}
	logFile *os.File
}

// serveStartTimeout bounds a replica's start, to its first /healthz answer.
const serveStartTimeout = 60 * time.Second

// newReplicas prepares n replicas under dir sharing database dsn, the API
// key, one master key and the replicas settings (Session lease and
// reconcile interval in seconds); start runs them.
func newReplicas(bin, dir, dsn string, n, leaseSeconds int) ([]*replicaProc, error) {
	var mk [32]byte
	if _, err := rand.Read(mk[:]); err != nil {
		return nil, fmt.Errorf("bench: master key: %w", err)
	}
	var reps []*replicaProc
	for i := range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("bench: pick a port: %w", err)
		}
		addr := l.Addr().String()
		l.Close()
		p := &replicaProc{name: string(rune('A' + i)), bin: bin, dir: filepath.Join(dir, fmt.Sprintf("replica-%d", i)), addr: addr,
			cgroup: fmt.Sprintf("astrabox-bench-replicas-%d-%d", os.Getpid(), i)}
		if err := os.MkdirAll(p.dir, 0o711); err != nil {
			return nil, fmt.Errorf("bench: replica dir: %w", err)
		}
		cfg, _ := json.Marshal(map[string]any{
			"replicas": map[string]any{"reconcileInterval": 1, "sessionLease": leaseSeconds},
			"native":   map[string]any{"cgroupParent": p.cgroup}})
		cfgFile := filepath.Join(p.dir, "config.json")
		if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
			return nil, fmt.Errorf("bench: replica config: %w", err)
		}
		if err := os.WriteFile(filepath.Join(p.dir, "master.key"), []byte(hex.EncodeToString(mk[:])+"\n"), 0o600); err != nil {
			return nil, fmt.Errorf("bench: master key: %w", err)
		}
		p.args = []string{"serve", "--listen", addr, "--data-dir", p.dir, "--api-key", benchAPIKey, "--database", dsn,
			"--backends", "native", "--config", cfgFile, "--public-host", addr}
		reps = append(reps, p)
	}
	return reps, nil
}

// url is the replica's base URL, as it names itself in leases.
func (p *replicaProc) url() string { return "http://" + p.addr }

// start runs the replica and waits until it answers /healthz. Its output
// is appended to serve.log in its data dir.
func (p *replicaProc) start(ctx context.Context) error {
	if p.logFile == nil {
		f, err := os.OpenFile(filepath.Join(p.dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return fmt.Errorf("bench: replica log: %w", err)
		}
		p.logFile = f
	}
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stdout, p.cmd.Stderr = p.logFile, p.logFile
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("bench: start replica %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.exited = exited
	go func() { _ = p.cmd.Wait(); close(exited) }()
	deadline := time.Now().Add(serveStartTimeout)
	for {
		if resp, err := http.Get(p.url() + "/healthz"); err == nil {
			resp.Body.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("bench: replica %s exited at start: %s", p.name, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: replica %s did not answer within %v", p.name, serveStartTimeout)
		}
	}
}

// running reports whether the replica's process is alive.
func (p *replicaProc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// kill9 kills the replica at once, as a crash would, and returns when the
// process is gone.
func (p *replicaProc) kill9() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// stop ends the replica gracefully (SIGTERM, then SIGKILL after 30 s).
func (p *replicaProc) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill9()
	}
}

// cleanup stops the replica and removes what its native backend left on
// the host: boxes still running (a box of a killed replica outlives it),
// the binary's mount and the cgroup parent.
func (p *replicaProc) cleanup() {
	p.stop()
	section := backends.NativeConfig{CgroupParent: p.cgroup}
	if prov, err := (backends.Config{Native: section}).Open("native", backends.Env{DataDir: p.dir, Binary: p.bin}); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		boxes, _ := prov.List(ctx)
		for _, b := range boxes {
			_ = prov.Delete(ctx, b.ID)
		}
		cancel()
		_ = backends.Release(prov)
	}
	_ = boxbin.Release(filepath.Join(p.dir, "native", "bin"))
	for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "freezer", ""} {
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", c, p.cgroup))
	}
	if p.logFile != nil {
		_ = p.logFile.Close()
	}
}

// logTail returns the end of the replica's log, for an error.
func (p *replicaProc) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.dir, "serve.log"))
	if err != nil {
		return err.Error()
	}
	s := strings.TrimSpace(string(b))
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// stopAll stops the replicas at once and releases what they left.
func stopAll(reps []*replicaProc) {
	var wg sync.WaitGroup
	for _, p := range reps {
		wg.Go(p.cleanup)
	}
	wg.Wait()
}
