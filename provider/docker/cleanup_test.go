package docker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/astrabox/astrabox/egress"
	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/provider/docker"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// hostState is what a docker backend may leave on the host: mounts under
// its data dir, the files there, the iptables rules of its owner's
// bridges and chains, and the engine networks of its owner.
type hostState struct {
	mounts, files, rules, networks []string
}

// ownerHash is the short hash of owner that the backend's bridge and
// chain names carry (lower case in bridges, upper case in chains).
func ownerHash(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:4])
}

func captureHost(t *testing.T, engine *client.Client, dataDir, owner string) hostState {
	t.Helper()
	var s hostState
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dataDir) {
			s.mounts = append(s.mounts, f[4])
		}
	}
	_ = filepath.WalkDir(dataDir, func(path string, d os.DirEntry, err error) error {
		if err == nil && path != dataDir {
			s.files = append(s.files, path)
		}
		return nil
	})
	out, err := exec.Command("iptables-save").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	hash := ownerHash(owner)
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(strings.ToLower(line), hash) {
			s.rules = append(s.rules, line)
		}
	}
	ns, err := engine.NetworkList(ctx(t), client.NetworkListOptions{Filters: make(client.Filters).Add("label", "io.astrabox.owner="+owner)})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range ns.Items {
		s.networks = append(s.networks, n.Name)
	}
	slices.Sort(s.networks)
	return s
}

func TestCleanStopLeavesNothing(t *testing.T) {
	testenv.NeedRoot(t)
	testenv.NeedDocker(t)
	testenv.NeedCommand(t, "iptables-save")
	dir, err := os.MkdirTemp("", "astrabox-docker-stoptest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	engine, err := client.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { engine.Close() })
	m := egress.NewManager(egress.Config{Logger: slog.New(slog.DiscardHandler)})
	t.Cleanup(m.Close)
	owner := "astrabox-stoptest-" + sandboxtest.NewID()
	cfg := docker.Config{DataDir: dir, Binary: testenv.AstraboxBinary(t), Owner: owner, Egress: m}
	before := captureHost(t, engine, dir, owner)
	p, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{p: p, cfg: cfg, engine: engine, dataDir: dir}
	image := testImage(t, p, engine)
	modes := []sandbox.NetworkMode{sandbox.NetworkUnrestricted, sandbox.NetworkNone}
	if p.Capabilities().Has(sandbox.CapNetworkLimited) {
		modes = append(modes, sandbox.NetworkLimited)
	} else {
		t.Log("network limited not offered here: not cycled")
	}
	for _, mode := range modes {
		spec := sandbox.Spec{Image: image, Network: sandbox.NetworkPolicy{Mode: mode}}
		if mode == sandbox.NetworkLimited {
			spec.Network.Rules = []sandbox.NetworkRule{{Action: "allow", Target: "example.com"}}
		}
		id := sandboxtest.NewID()
		if _, err := p.Create(ctx(t), id, spec); err != nil {
			t.Fatalf("create a box of network %s: %v", mode, err)
		}
		if err := p.Delete(ctx(t), id); err != nil {
			t.Fatal(err)
		}
		h.CheckGone(t, id)
	}
	// A box left running keeps what it needs across the stop: its
	// network, the network's rules, its binary and its directory.
	kept := sandboxtest.NewID()
	if _, err := p.Create(ctx(t), kept, sandbox.Spec{Image: image, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.engine.ContainerRemove(ctx(t), owner+"-"+kept, client.ContainerRemoveOptions{Force: true}) })
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	mid := captureHost(t, engine, dir, owner)
	if len(mid.mounts) == 0 || len(mid.rules) == 0 || len(mid.networks) == 0 || !slices.Contains(mid.files, filepath.Join(dir, "boxes", kept)) {
		t.Fatalf("a stop with a box running released what it needs: %+v", mid)
	}
	// The next server on the data dir, which never made the network
	// itself, finds the box running and, once it is deleted, leaves the
	// host as it was before the first server started.
	p2, err := docker.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := p2.Inspect(ctx(t), kept); err != nil || info.State != sandbox.StateRunning {
		t.Fatalf("the kept box after the restart: %+v %v", info, err)
	}
	if err := p2.Delete(ctx(t), kept); err != nil {
		t.Fatal(err)
	}
	if err := p2.Close(); err != nil {
		t.Fatal(err)
	}
	after := captureHost(t, engine, dir, owner)
	for _, c := range []struct {
		what          string
		before, after []string
	}{
		{"mounts", before.mounts, after.mounts},
		{"files in the data dir", before.files, after.files},
		{"iptables rules", before.rules, after.rules},
		{"engine networks", before.networks, after.networks},
	} {
		if !slices.Equal(c.before, c.after) {
			t.Errorf("%s: before %q, after %q", c.what, c.before, c.after)
		}
	}
}
