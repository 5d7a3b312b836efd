package kubernetes

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/astrabox/astrabox/internal/testenv"
	"github.com/astrabox/astrabox/sandbox"
	"github.com/astrabox/astrabox/sandbox/sandboxtest"
)

// Environment of the tests that need a cluster (hack/k8s/cluster.sh env
// prints it for the offline test cluster).
const (
	// envKubeconfig names the kubeconfig of a cluster the tests may make
	// namespaces in.
	envKubeconfig = "ASTRABOX_TEST_KUBECONFIG"
	// envImage names an image with bash, coreutils and python3 that the
	// cluster's node holds (the tests never pull).
	envImage = "ASTRABOX_TEST_K8S_IMAGE"
	// envImport is a command that imports the image archive named by its
	// last argument into the node (ctr ... images import); the tests put
	// the binary under test into an execd image with it.
	envImport = "ASTRABOX_TEST_K8S_IMPORT"
	// envSeccomp names the Localhost seccomp profile (SeccompProfile)
	// installed on the node; empty tests RuntimeDefault.
	envSeccomp = "ASTRABOX_TEST_K8S_SECCOMP"
)

// harness runs the conformance suite, and this package's own tests, on a
// Provider in a fresh namespace with a fresh owner.
type harness struct {
	p     *Provider
	cfg   Config
	image string

	mu       sync.Mutex
	reopened []*Provider
}

func (h *harness) Provider() sandbox.Provider { return h.p }

// Spec leaves room for the suite's 1 GiB file: /workspace is a memory
// emptyDir, charged to the box's memory limit. A quarter of a core lets
// eight boxes, each Guaranteed, share the two cores of a CI node.
func (h *harness) Spec() sandbox.Spec {
	return sandbox.Spec{Image: h.image, Resources: sandbox.Resources{MilliCPU: 250, MemoryBytes: 3 << 30, DiskBytes: 2 << 30}}
}

// CheckGone implements sandboxtest.LeakChecker: no Pod or Secret labelled
// with the id remains.
func (h *harness) CheckGone(t *testing.T, id string) {
	t.Helper()
	opts := metav1.ListOptions{LabelSelector: labelID + "=" + id}
	pods, err := h.p.cs.CoreV1().Pods(h.cfg.Namespace).List(ctx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		t.Errorf("pod %s of %s is left (%s)", p.Name, id, p.Status.Phase)
	}
	secs, err := h.p.cs.CoreV1().Secrets(h.cfg.Namespace).List(ctx(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secs.Items {
		t.Errorf("secret %s of %s is left", s.Name, id)
	}
}

// Reopen implements sandboxtest.Reopener: a Provider on the same cluster,
// namespace and owner, as a restarted server makes.
func (h *harness) Reopen(t *testing.T) sandbox.Provider {
	p, err := New(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reopened = append(h.reopened, p)
	return p
}

// Orphan implements sandboxtest.Orphaner: a crash that lost the box's
// record (its Secret) leaves its Pod.
func (h *harness) Orphan(t *testing.T, id string) {
	err := h.p.cs.CoreV1().Secrets(h.cfg.Namespace).Delete(ctx(t), h.p.podName(id), metav1.DeleteOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// capMask is the capability set a box's root keeps: CHOWN, DAC_OVERRIDE,
// FOWNER, FSETID, KILL, SETGID, SETUID, SETPCAP and NET_BIND_SERVICE.
const capMask = "00000000000005fb"

// Hardening implements sandboxtest.Hardened: root keeps capMask, bounding
// set included; no volume of the kubelet's (kubernetes.io~...: every
// volume of a box is a tmpfs), no service-account token and not the
// kubeconfig shows in a box's mountinfo. The kubelet's
// own files (/etc/hosts, /dev/termination-log) do show their node paths,
// as the Docker engine's do.
func (h *harness) Hardening() sandboxtest.Hardening {
	return sandboxtest.Hardening{
		RootStatus: []string{"CapEff:\t" + capMask, "CapBnd:\t" + capMask},
		HostPaths:  []string{"kubernetes.io~", "serviceaccount", os.Getenv(envKubeconfig)},
	}
}

var (
	execdMu    sync.Mutex
	execdImage string
)

// testExecdImage puts the astrabox binary under test into an execd image
// (only the binary, at /astrabox) and imports it with envImport, once per
// test process; the tag is the binary's hash.
func testExecdImage(t *testing.T) string {
	execdMu.Lock()
	defer execdMu.Unlock()
	if execdImage != "" {
		return execdImage
	}
	imp := strings.Fields(os.Getenv(envImport))
	testenv.Need(t, len(imp) > 0, envImport+" (a command importing an image archive into the node)")
	bin := testenv.AstraboxBinary(t)
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	ref := "astrabox.local/execd:test-" + hex.EncodeToString(sum[:6])
	archive := filepath.Join(t.TempDir(), "execd.tar")
	if err := writeBinaryImage(archive, ref, b); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(imp[0], append(imp[1:], archive)...).CombinedOutput()
	if err != nil {
		t.Fatalf("import the execd image: %v: %s", err, out)
	}
	execdImage = ref
	return ref
}

// writeBinaryImage writes a docker-archive of image ref holding only bin,
// as /astrabox, its entrypoint.
func writeBinaryImage(path, ref string, bin []byte) error {
	var layer strings.Builder
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "astrabox", Mode: 0o755, Size: int64(len(bin)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(bin); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	ls := sha256.Sum256([]byte(layer.String()))
	diff := hex.EncodeToString(ls[:])
	cfg, _ := json.Marshal(map[string]any{"architecture": "amd64", "os": "linux",
		"config": map[string]any{"Entrypoint": []string{"/astrabox"}},
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + diff}}})
	cs := sha256.Sum256(cfg)
	cfgName := hex.EncodeToString(cs[:]) + ".json"
	manifest, _ := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{ref}, "Layers": []string{diff + "/layer.tar"}}})
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := tar.NewWriter(f)
	for _, e := range []struct {
		name string
		data []byte
	}{{"manifest.json", manifest}, {cfgName, cfg}, {diff + "/layer.tar", []byte(layer.String())}} {
		if err := w.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := w.Write(e.data); err != nil {
			return err
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	return f.Close()
}

// newHarness returns a harness on a fresh namespace; adjust changes the
// Config before the Provider is made.
func newHarness(t *testing.T, adjust func(*Config)) *harness {
	kc := os.Getenv(envKubeconfig)
	testenv.Need(t, kc != "", envKubeconfig+" (a kubeconfig of a test cluster)")
	img := os.Getenv(envImage)
	testenv.Need(t, img != "", envImage+" (an image with bash and python3 that the node holds)")
	ns := "abx-test-" + sandboxtest.NewID()
	cfg := Config{Kubeconfig: kc, Namespace: ns, ExecdImage: testExecdImage(t), Owner: "test-" + sandboxtest.NewID(),
		PullPolicy: PullPolicy(corev1.PullNever), SeccompProfile: os.Getenv(envSeccomp)}
	if adjust != nil {
		adjust(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.cs.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, createOpts); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", ns, err)
	}
	h := &harness{p: p, cfg: cfg, image: img}
	t.Cleanup(func() {
		for _, p2 := range h.reopened {
			p2.Close()
		}
		h.checkOwnerGone(t)
		p.Close()
		_ = p.cs.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	return h
}

// checkOwnerGone checks that, once its boxes are deleted, nothing the
// backend made is left in the namespace.
func (h *harness) checkOwnerGone(t *testing.T) {
	t.Helper()
	list, err := h.p.List(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range list {
		t.Errorf("box %s is left (%s: %s)", b.ID, b.State, b.Reason)
	}
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return c
}
