package opensandbox_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/opensandbox"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// remoteKey is the API key of the remote servers these tests start.
const remoteKey = "remote-test-key"

// remote is an `astrabox serve` process with the native backend: the
// remote lifecycle service under test.
type remote struct {
	url string
	cmd *exec.Cmd
	log *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startRemote starts a remote on a fresh data dir and stops it (and
// removes what its native backend left on the host) when t ends. It needs
// root.
func startRemote(t *testing.T) *remote {
	t.Helper()
	testenv.NeedRoot(t)
	bin := testenv.AstraboxBinary(t)
	dataDir, err := os.MkdirTemp("", "astrabox-remote-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o711); err != nil { // box uids traverse it
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	r := &remote{url: "http://" + addr, log: &syncBuffer{}}
	r.cmd = exec.Command(bin, "serve", "--listen", addr, "--data-dir", dataDir, "--api-key", remoteKey, "--backends", "native")
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(exited) }()
	sum := sha256.Sum256([]byte(filepath.Join(dataDir, "native")))
	cgroupParent := "astrabox-" + hex.EncodeToString(sum[:4])
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = r.cmd.Process.Kill()
			<-exited
		}
		bin := filepath.Join(dataDir, "native", "bin")
		if err := unix.Unmount(bin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Errorf("unmount %s: %v", bin, err)
		}
		for _, c := range []string{"memory", "pids", "cpu", "cpuacct", "freezer", ""} {
			_ = os.Remove(filepath.Join("/sys/fs/cgroup", c, cgroupParent))
		}
		_ = os.RemoveAll(dataDir)
		if t.Failed() {
			t.Logf("remote log:\n%s", r.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(r.url + "/healthz"); err == nil {
			resp.Body.Close()
			return r
		}
		select {
		case <-exited:
			t.Fatalf("remote exited:\n%s", r.log.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("remote did not answer within 30s")
	return nil
}

// newProvider returns a healthy Provider on cfg, closed when t ends.
func newProvider(t *testing.T, cfg opensandbox.Config) *opensandbox.Provider {
	t.Helper()
	p, err := opensandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		h := p.Health(ctx)
		if h.Status == sandbox.Healthy {
			return p
		}
		if ctx.Err() != nil {
			t.Fatalf("remote never healthy: %+v", h)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func randomOwner() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "test-" + hex.EncodeToString(b[:])
}

type harness struct {
	t   *testing.T
	p   *opensandbox.Provider
	cfg opensandbox.Config
}

func (h harness) Provider() sandbox.Provider { return h.p }

// Spec is the native backend's harness's: the Files case writes a 1 GiB
// file, the Limits case sets its own.
func (h harness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: "host", Resources: sandbox.Resources{MemoryBytes: 3 << 30, DiskBytes: 2 << 30}}
}

// Reopen implements sandboxtest.Reopener: a second Provider of the same
// remote and owner, as a restarted server makes.
func (h harness) Reopen(t *testing.T) sandbox.Provider { return newProvider(t, h.cfg) }

// TestConformance runs the conformance suite on a remote `astrabox serve`
// with the native backend (root).
func TestConformance(t *testing.T) {
	r := startRemote(t)
	cfg := opensandbox.Config{Name: "remote", URL: r.url, APIKey: remoteKey, Owner: randomOwner()}
	sandboxtest.Run(t, harness{t: t, p: newProvider(t, cfg), cfg: cfg})
}
