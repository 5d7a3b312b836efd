package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/provider/native"
	"github.com/astrabox/astrabox/sandbox"
)

// leftovers is what a backend's boxes hold on the host, found before
// uninstall so that afterwards each can be checked gone.
type leftovers struct {
	pids []int
	// gone reports what of the backend is still on the host, by kind.
	gone func(t *testing.T) []string
}

// boxSetup makes boxes of one backend on data dir dir, as a server would
// have left them when it stopped for good: running, paused and past
// their deadline, with a named volume. It returns the box ids and what
// they hold.
type boxSetup func(t *testing.T, ctx context.Context, dir string) ([]string, leftovers)

func TestUninstallRemovesEverything(t *testing.T) {
	testenv.NeedRoot(t)
	for _, tc := range []struct {
		name  string
		setup boxSetup
	}{
		{"native", nativeBoxes},
		{"docker", dockerBoxes},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			dir, err := os.MkdirTemp("", "astrabox-uninstall-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			if err := os.Chmod(dir, 0o711); err != nil {
				t.Fatal(err)
			}
			ids, left := tc.setup(t, ctx, dir)
			run := func(args ...string) (int, string, string) {
				var out, errOut bytes.Buffer
				code := Main(ctx, append([]string{"uninstall", "--data-dir", dir}, args...), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}, func(string) string { return "" })
				return code, out.String(), errOut.String()
			}

			// Without --yes: the plan, naming each box; exit 1 and nothing
			// removed.
			code, out, errOut := run()
			if code == 0 || !strings.Contains(errOut, "--yes") {
				t.Fatalf("uninstall without --yes: exit %d, %q", code, errOut)
			}
			t.Logf("the plan:\n%s", out)
			for _, id := range ids {
				if !strings.Contains(out, id) {
					t.Errorf("the plan does not name box %s:\n%s", id, out)
				}
			}
			for _, pid := range left.pids {
				if !alive(pid) {
					t.Fatalf("process %d of a box is gone after a dry run", pid)
				}
			}
			// While a server holds the data dir: refused.
			unlock, err := lockDataDir(dir, false)
			if err != nil {
				t.Fatal(err)
			}
			code, _, errOut = run("--yes")
			unlock()
			if code == 0 || !strings.Contains(errOut, "astrabox serve (or another uninstall) holds") {
				t.Fatalf("uninstall while a server runs: exit %d, %q", code, errOut)
			}
			if _, err := os.Stat(dir); err != nil {
				t.Fatalf("the data dir after a refused uninstall: %v", err)
			}

			code, out, errOut = run("--yes")
			if code != 0 {
				t.Fatalf("uninstall --yes: exit %d\n%s%s", code, out, errOut)
			}
			t.Logf("uninstall --yes:\n%s", out)
			for _, id := range ids {
				if !strings.Contains(out, "deleted "+tc.name+" box "+id+" (") {
					t.Errorf("uninstall does not report deleting box %s", id)
				}
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("the data dir is left: %v", err)
			}
			if m := mountsUnder(dir); len(m) > 0 {
				t.Errorf("mounts are left under the data dir: %q", m)
			}
			for _, pid := range left.pids {
				if alive(pid) {
					t.Errorf("process %d of a box is alive", pid)
				}
			}
			for _, what := range left.gone(t) {
				t.Errorf("left on the host: %s", what)
			}
		})
	}
}

// TestDataDirLock: servers share a data dir's lock, uninstall takes it
// alone, and each is refused while the other holds it.
func TestDataDirLock(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name            string
		first, second   bool // exclusive
		ok              bool
		wantErrContains string
	}{
		{"two servers", false, false, true, ""},
		{"uninstall while a server runs", false, true, false, "astrabox serve (or another uninstall) holds"},
		{"a server while uninstall runs", true, false, false, "being uninstalled"},
		{"two uninstalls", true, true, false, "astrabox serve (or another uninstall) holds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			release, err := lockDataDir(dir, tc.first)
			if err != nil {
				t.Fatal(err)
			}
			defer release()
			release2, err := lockDataDir(dir, tc.second)
			if tc.ok != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.wantErrContains) {
				t.Fatalf("second lock: %v, want ok %v", err, tc.ok)
			}
			if err == nil {
				release2()
			}
		})
	}
	// Released: uninstall gets it.
	release, err := lockDataDir(dir, true)
	if err != nil {
		t.Fatalf("after every holder released it: %v", err)
	}
	release()
}

// TestUninstallRefuses covers what uninstall refuses before it touches
// anything.
func TestUninstallRefuses(t *testing.T) {
	notOurs := t.TempDir()
	if err := os.WriteFile(filepath.Join(notOurs, "precious"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stdout or stderr
	}{
		{"no data dir", nil, 1, "usage"},
		{"stray argument", []string{"--data-dir", notOurs, "now"}, 1, "usage"},
		{"not a data dir", []string{"--data-dir", notOurs, "--yes"}, 1, "does not look like an AstraBox data dir"},
		{"no such dir", []string{"--data-dir", filepath.Join(notOurs, "gone"), "--yes"}, 0, "nothing to remove"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(context.Background(), append([]string{"uninstall"}, tc.args...), IO{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut}, func(string) string { return "" })
			if code != tc.code || !strings.Contains(out.String()+errOut.String(), tc.want) {
				t.Fatalf("exit %d, %q %q; want %d and %q", code, out.String(), errOut.String(), tc.code, tc.want)
			}
		})
	}
	if _, err := os.Stat(filepath.Join(notOurs, "precious")); err != nil {
		t.Fatalf("a directory that is not a data dir lost a file: %v", err)
	}
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

// cgroupDirs lists the cgroups, in any hierarchy, whose path holds name.
func cgroupDirs(name string) []string {
	var out []string
	_ = filepath.WalkDir("/sys/fs/cgroup", func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() && strings.Contains(path, name) {
			out = append(out, path)
			return filepath.SkipDir
		}
		return nil
	})
	return out
}

// cgroupProcs lists the processes in the cgroups under parent whose path
// holds sub.
func cgroupProcs(parent, sub string) []int {
	var pids []int
	for _, cg := range cgroupDirs(parent) {
		_ = filepath.WalkDir(cg, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" || !strings.Contains(path, sub) {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(f); err == nil {
					pids = append(pids, n)
				}
			}
			return nil
		})
	}
	return pids
}

func nativeBoxes(t *testing.T, ctx context.Context, dir string) ([]string, leftovers) {
	data := filepath.Join(dir, "native")
	// The cgroup parent uninstall derives, as serve does, from the data dir.
	sum := sha256.Sum256([]byte(data))
	parent := "astrabox-" + hex.EncodeToString(sum[:4])
	p, err := native.New(native.Config{DataDir: data, Binary: testenv.AstraboxBinary(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // only when uninstall failed
		if list, err := p.List(context.Background()); err == nil {
			for _, b := range list {
				_ = p.Delete(context.Background(), b.ID)
			}
		}
		_ = p.Close()
	})
	running := sandbox.Spec{Image: "host", Volumes: []sandbox.Volume{{Name: "w", Claim: "uninstall-vol", MountPath: "/data"}}}
	if p.Capabilities().Has(sandbox.CapNetworkUnrestricted) {
		running.Network.Mode = sandbox.NetworkUnrestricted
	}
	expiring := sandbox.Spec{Image: "host", Timeout: time.Second}
	ids := []string{"uninstall-run-" + strconv.Itoa(os.Getpid()), "uninstall-paused-" + strconv.Itoa(os.Getpid()), "uninstall-expired-" + strconv.Itoa(os.Getpid())}
	for i, spec := range []sandbox.Spec{running, {Image: "host"}, expiring} {
		if _, err := p.Create(ctx, ids[i], spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Pause(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	// The server stops for good, its boxes running; the expiring box's
	// deadline passes.
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(15 * time.Second); len(cgroupProcs(parent, ids[2])) > 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the expiring box still runs 15 s after its deadline")
		}
	}
	// What is left running: the processes of the running and paused boxes.
	pids := cgroupProcs(parent, "")
	if len(pids) == 0 {
		t.Fatalf("no process in the boxes' cgroups (%s)", parent)
	}
	return ids, leftovers{pids: pids, gone: func(t *testing.T) []string {
		var left []string
		for _, cg := range cgroupDirs(parent) {
			left = append(left, "cgroup "+cg)
		}
		return left
	}}
}

// dockerCLI runs the docker command and returns its output's lines.
func dockerCLI(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker %s: %v", strings.Join(args, " "), err)
	}
	return strings.Fields(string(out))
}

func dockerBoxes(t *testing.T, ctx context.Context, dir string) ([]string, leftovers) {
	testenv.NeedDocker(t)
	testenv.NeedCommand(t, "docker")
	rootfs := os.Getenv("ASTRABOX_TEST_ROOTFS")
	testenv.Need(t, rootfs != "", "a Debian rootfs tarball (ASTRABOX_TEST_ROOTFS)")
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
	data := filepath.Join(dir, "docker")
	owner := docker.DefaultOwner(data)
	p, err := docker.New(docker.Config{DataDir: data, Binary: testenv.AstraboxBinary(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	label := "label=io.astrabox.owner=" + owner
	t.Cleanup(func() { // only when uninstall failed
		for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
			ids, _ := exec.Command("docker", append(kind, "--filter", label)...).Output()
			for _, id := range strings.Fields(string(ids)) {
				rm := map[string][]string{"ps": {"rm", "-f"}, "network": {"network", "rm"}, "volume": {"volume", "rm", "-f"}}[kind[0]]
				_ = exec.Command("docker", append(rm, id)...).Run()
			}
		}
	})
	running := sandbox.Spec{Image: img, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted},
		Volumes: []sandbox.Volume{{Name: "w", Claim: "uninstall-vol", MountPath: "/data"}}}
	ids := []string{"uninstall-run-" + strconv.Itoa(os.Getpid()), "uninstall-paused-" + strconv.Itoa(os.Getpid())}
	for i, spec := range []sandbox.Spec{running, {Image: img}} {
		if _, err := p.Create(ctx, ids[i], spec); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Pause(ctx, ids[1]); err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, id := range ids {
		for _, f := range dockerCLI(t, "inspect", "-f", "{{.State.Pid}}", owner+"-"+id) {
			if n, err := strconv.Atoi(f); err == nil && n > 0 {
				pids = append(pids, n)
			}
		}
	}
	if len(pids) != len(ids) {
		t.Fatalf("pids of the boxes' containers: %v", pids)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	return ids, leftovers{pids: pids, gone: func(t *testing.T) []string {
		var left []string
		for _, kind := range [][]string{{"ps", "-aq"}, {"network", "ls", "-q"}, {"volume", "ls", "-q"}} {
			for _, id := range dockerCLI(t, append(kind, "--filter", label)...) {
				left = append(left, "docker "+kind[0]+" "+id)
			}
		}
		if out, err := exec.Command("iptables-save").Output(); err == nil {
			sum := sha256.Sum256([]byte(owner))
			hash := hex.EncodeToString(sum[:4])
			for _, line := range strings.Split(string(out), "\n") {
				if strings.Contains(strings.ToLower(line), hash) {
					left = append(left, "iptables rule "+line)
				}
			}
		}
		return left
	}}
}
