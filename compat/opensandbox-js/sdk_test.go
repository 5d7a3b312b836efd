// Package sdk_test drives a real AstraBox server with the official
// OpenSandbox JavaScript SDK (@alibaba-group/opensandbox, pinned in
// package-lock.json): it installs the SDK with npm, builds astrabox, serves
// it with the native backend and runs sdk.test.mjs with node --test.
//
// It needs root (the native backend), node, npm and python3; outside CI it
// skips without them.
package sdk_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
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

	"github.com/astrabox/astrabox/internal/nodetest"

	"golang.org/x/sys/unix"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
)

// cgroupControllers are the cgroup v1 hierarchies of the native backend
// ("" is the v2 unified one).
var cgroupControllers = []string{"memory", "pids", "cpu", "cpuacct", "freezer", ""}

func TestOpenSandboxJSSDK(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout(t))
	defer cancel()
	installSDK(ctx, t, pkgDir)
	binary := testenv.AstraboxBinary(t)

	t.Run("native", func(t *testing.T) {
		// The sandbox (image "host") sees the host's /usr; the test serves
		// files from it with python3 -m http.server.
		testenv.Need(t, fileExists("/usr/bin/python3") || fileExists("/usr/local/bin/python3"), "python3 in /usr/bin or /usr/local/bin")
		srv := startServer(ctx, t, binary)
		runSDKTest(ctx, t, pkgDir, "sdk.test.mjs", srv, "host", `{}`)
	})
	t.Run("opensandbox", func(t *testing.T) {
		// The same test through a second server whose backend "rem" (an
		// opensandbox backend) is the first server, with its native one.
		testenv.Need(t, fileExists("/usr/bin/python3") || fileExists("/usr/local/bin/python3"), "python3 in /usr/bin or /usr/local/bin")
		remote := startServer(ctx, t, binary)
		cfg := filepath.Join(t.TempDir(), "outer.json")
		body := fmt.Sprintf(`{"opensandbox": {"rem": {"url": "http://%s", "apiKey": %q}}}`, remote.addr, remote.key)
		if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		srv := startServer(ctx, t, binary, "--config", cfg, "--backends", "native,rem")
		runSDKTest(ctx, t, pkgDir, "sdk.test.mjs", srv, "host", `{"backend":"rem"}`)
	})
	t.Run("docker", func(t *testing.T) {
		// The same test on a Docker profile: a Debian image loaded into the
		// engine from the rootfs tarball CI builds.
		img := dockerImage(ctx, t, binary)
		srv := startServer(ctx, t, binary, "--backends", "native,docker")
		runSDKTest(ctx, t, pkgDir, "sdk.test.mjs", srv, img, `{"backend":"docker"}`)
	})
}

// dockerImage loads the Debian test rootfs (ASTRABOX_TEST_ROOTFS) into the
// Docker Engine and returns its name; it needs Docker and the tarball.
func dockerImage(ctx context.Context, t *testing.T, binary string) string {
	t.Helper()
	testenv.NeedDocker(t)
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
	const img = "astrabox-compat-debian:12"
	if out, err := exec.CommandContext(ctx, binary, "image", "import", img, rootfs, "--docker",
		"--data-dir", t.TempDir()).CombinedOutput(); err != nil {
		t.Fatalf("image import --docker: %v: %s", err, out)
	}
	return img
}

// runSDKTest runs script (node --test) against srv with sandboxes of image
// on the backend extensions select; env adds variables.
func runSDKTest(ctx context.Context, t *testing.T, pkgDir, script string, srv *server, image, extensions string, env ...string) {
	t.Helper()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", script)
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(),
		"OPEN_SANDBOX_DOMAIN="+srv.addr,
		"OPEN_SANDBOX_API_KEY="+srv.key,
		"SANDBOX_IMAGE="+image,
		"SANDBOX_EXTENSIONS="+extensions,
		"NO_COLOR=1",
	)
	cmd.Env = append(cmd.Env, env...)
	out := newLineLogger(t, "sdk: ")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out.Flush()
	if err != nil {
		t.Fatalf("node --test %s: %v (its output is above; the server log follows)", script, err)
	}
}

// The package's tests run one after another and share one install.
var (
	sdkOnce sync.Once
	sdkErr  error
)

// installSDK installs the pinned SDK into pkgDir/node_modules, once per
// test process: npm ci from the lock file, or npm install when there is
// none. Every caller fails when that install failed.
func installSDK(ctx context.Context, t *testing.T, pkgDir string) {
	t.Helper()
	sdkOnce.Do(func() { sdkErr = npmInstall(ctx, t, pkgDir) })
	if sdkErr != nil {
		t.Fatal(sdkErr)
	}
}

// npmInstall runs npm in pkgDir, its output logged to t.
func npmInstall(ctx context.Context, t *testing.T, pkgDir string) error {
	args := []string{"ci", "--no-audit", "--no-fund"}
	if _, err := os.Stat(filepath.Join(pkgDir, "package-lock.json")); errors.Is(err, os.ErrNotExist) {
		args[0] = "install"
	}
	cmd := exec.CommandContext(ctx, "npm", args...)
	cmd.Dir = pkgDir
	out := newLineLogger(t, "npm: ")
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = 10 * time.Second
	err := cmd.Run()
	out.Flush()
	if err != nil {
		return fmt.Errorf("npm %s: %w", args[0], err)
	}
	return nil
}

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

type server struct {
	addr string // host:port
	key  string
	log  *syncBuffer
}

// startServer runs `astrabox serve` (with args) on a free
// port and a fresh data directory, and waits until /healthz answers. Its
// cleanup deletes the sandboxes left, stops the server and removes what
// the native backend left on the host.
func startServer(ctx context.Context, t *testing.T, binary string, args ...string) *server {
	t.Helper()
	// Box processes run as unprivileged uids and must traverse the data
	// directory: 0711, under the (world-traversable) temporary directory.
	dataDir, err := os.MkdirTemp("", "astrabox-compat-js-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dataDir, 0o711); err != nil {
		t.Fatal(err)
	}
	// The native backend's cgroup parent is "astrabox-" and a hash of its
	// data dir, so this server's boxes are apart from any other server's.
	sum := sha256.Sum256([]byte(filepath.Join(dataDir, "native")))
	cgroupParent := "astrabox-" + hex.EncodeToString(sum[:4])
	var ownCgroups []string
	for _, c := range cgroupControllers {
		ownCgroups = append(ownCgroups, filepath.Join("/sys/fs/cgroup", c, cgroupParent))
	}
	t.Cleanup(func() {
		for _, backend := range []string{"native", "docker"} {
			bin := filepath.Join(dataDir, backend, "bin")
			if err := unix.Unmount(bin, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				t.Errorf("unmount %s: %v", bin, err)
			}
		}
		// The cgroup parent goes once empty.
		for _, dir := range ownCgroups {
			_ = os.Remove(dir)
		}
		if err := os.RemoveAll(dataDir); err != nil {
			t.Errorf("remove data dir: %v", err)
		}
	})

	key := randomHex(24)
	addr := freeAddr(t)
	s := &server{addr: addr, key: key, log: &syncBuffer{}}
	cmd := exec.Command(binary, append([]string{"serve", "--listen", addr, "--data-dir", dataDir, "--api-key", key}, args...)...)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
			return // it failed to start; the failure carries its log
		default:
		}
		s.deleteSandboxes(t)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Errorf("astrabox serve did not stop within 20s of SIGTERM; killing it")
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("server log:\n%s", s.log.String())
		}
	})

	deadline := time.Now().Add(30 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		if healthy(ctx, "http://"+addr+"/healthz") {
			return s
		}
		select {
		case <-exited:
			t.Fatalf("astrabox serve exited before it was healthy: %v\n%s", waitErr, s.log.String())
		case <-ctx.Done():
			t.Fatalf("astrabox serve: %v\n%s", ctx.Err(), s.log.String())
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			t.Fatalf("astrabox serve was not healthy within 30s\n%s", s.log.String())
		}
	}
}

// deleteSandboxes deletes, through the API, every sandbox the server
// still has, so that none outlives the test (a stopped server leaves its
// sandboxes running).
func (s *server) deleteSandboxes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := client.New("http://"+s.addr, s.key)
	for range 10 {
		list, err := c.List(ctx, client.ListOptions{PageSize: 200})
		if err != nil {
			t.Errorf("list sandboxes left: %v", err)
			return
		}
		if len(list.Items) == 0 {
			return
		}
		for _, sb := range list.Items {
			t.Logf("deleting sandbox %s left by the SDK test (state %s)", sb.ID, sb.Status.State)
			if err := c.Delete(ctx, sb.ID); err != nil && client.CodeOf(err) != sandbox.CodeSandboxNotFound {
				t.Errorf("delete sandbox %s: %v", sb.ID, err)
			}
		}
	}
	t.Errorf("sandboxes are still listed after 10 rounds of deletes")
}

func healthy(ctx context.Context, url string) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lineLogger writes each complete line to the test log as it arrives.
type lineLogger struct {
	t      *testing.T
	prefix string
	mu     sync.Mutex
	buf    []byte
}

func newLineLogger(t *testing.T, prefix string) *lineLogger {
	return &lineLogger{t: t, prefix: prefix}
}

func (l *lineLogger) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		l.t.Log(l.prefix + strings.TrimRight(string(l.buf[:i]), "\r"))
		l.buf = l.buf[i+1:]
	}
	return len(p), nil
}

// Flush logs a last line without a newline.
func (l *lineLogger) Flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 {
		l.t.Log(l.prefix + string(l.buf))
		l.buf = nil
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writers and readers.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	sc := bufio.NewScanner(bytes.NewReader(b.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	var out strings.Builder
	for sc.Scan() {
		fmt.Fprintln(&out, "  "+sc.Text())
	}
	return out.String()
}

// testTimeout leaves a minute of the test binary's deadline for cleanup.
func testTimeout(t *testing.T) time.Duration { return nodetest.Timeout(t, 10*time.Minute) }
