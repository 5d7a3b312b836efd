package kubernetes

import (
	"context"
	"os"
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
		HostPaths:  []string{"kubernetes.io~", "serviceaccount", os.Getenv(testenv.EnvKubeconfig)},
	}
}

// newHarness returns a harness on a fresh namespace; adjust changes the
// Config before the Provider is made.
func newHarness(t *testing.T, adjust func(*Config)) *harness {
	k := testenv.NeedKube(t)
	ns := "abx-test-" + sandboxtest.NewID()
	cfg := Config{Kubeconfig: k.Kubeconfig, Namespace: ns, ExecdImage: k.ExecdImage, Owner: "test-" + sandboxtest.NewID(),
		PullPolicy: PullPolicy(corev1.PullNever), SeccompProfile: k.Seccomp}
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
	h := &harness{p: p, cfg: cfg, image: k.Image}
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
