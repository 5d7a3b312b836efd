package testenv

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/astrabox/astrabox/internal/imagearchive"
)

// Environment of the tests that need a Kubernetes cluster
// (`hack/k8s/cluster.sh env` prints it for the offline test cluster).
const (
	// EnvKubeconfig names the kubeconfig of a cluster the tests may make
	// namespaces in.
	EnvKubeconfig = "ASTRABOX_TEST_KUBECONFIG"
	// EnvKubeImage names an image with bash, coreutils and python3 that
	// the cluster's node holds (the tests never pull).
	EnvKubeImage = "ASTRABOX_TEST_K8S_IMAGE"
	// EnvKubeImport is a command that imports the image archive named by
	// its last argument into the node (ctr ... images import).
	EnvKubeImport = "ASTRABOX_TEST_K8S_IMPORT"
	// EnvKubeSeccomp names the Localhost seccomp profile installed on the
	// node; empty tests RuntimeDefault.
	EnvKubeSeccomp = "ASTRABOX_TEST_K8S_SECCOMP"
	// EnvKubectl names the cluster's kubectl (optional), with which tests
	// that drive a server remove what it left in the cluster.
	EnvKubectl = "ASTRABOX_TEST_KUBECTL"
)

// Kube is what a test needs of the test cluster.
type Kube struct {
	Kubeconfig string // path
	Image      string // the boxes' image, on the node
	ExecdImage string // an execd image of the binary under test, on the node
	Seccomp    string // Localhost seccomp profile, or "" for RuntimeDefault
	Kubectl    string // the cluster's kubectl, or ""
}

// NeedKube requires the test cluster: its kubeconfig, the boxes' image and
// the import command, with which it puts the astrabox binary under test
// into an execd image on the node (once per test process).
func NeedKube(t testing.TB) Kube {
	t.Helper()
	kc := os.Getenv(EnvKubeconfig)
	Need(t, kc != "", EnvKubeconfig+" (a kubeconfig of a test cluster)")
	img := os.Getenv(EnvKubeImage)
	Need(t, img != "", EnvKubeImage+" (an image with bash and python3 that the node holds)")
	return Kube{Kubeconfig: kc, Image: img, ExecdImage: kubeExecdImage(t), Seccomp: os.Getenv(EnvKubeSeccomp),
		Kubectl: os.Getenv(EnvKubectl)}
}

var (
	execdMu    sync.Mutex
	execdImage string
)

// kubeExecdImage imports an image holding only the binary under test; its
// tag is the binary's hash.
func kubeExecdImage(t testing.TB) string {
	t.Helper()
	execdMu.Lock()
	defer execdMu.Unlock()
	if execdImage != "" {
		return execdImage
	}
	imp := strings.Fields(os.Getenv(EnvKubeImport))
	Need(t, len(imp) > 0, EnvKubeImport+" (a command importing an image archive into the node)")
	b, err := os.ReadFile(AstraboxBinary(t))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	ref := "astrabox.local/execd:test-" + hex.EncodeToString(sum[:6])
	archive := filepath.Join(t.TempDir(), "execd.tar")
	if err := imagearchive.WriteBinary(archive, ref, b); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(imp[0], append(imp[1:], archive)...).CombinedOutput(); err != nil {
		t.Fatalf("import the execd image: %v: %s", err, out)
	}
	execdImage = ref
	return ref
}

// RemoveOwned deletes, with kubectl, the Pods and Secrets of owner in
// namespace and returns what it deleted ("" when there was nothing, or no
// kubectl to ask).
func (k Kube) RemoveOwned(t testing.TB, namespace, owner string) string {
	t.Helper()
	if k.Kubectl == "" {
		return ""
	}
	out, err := exec.Command(k.Kubectl, "--kubeconfig", k.Kubeconfig, "-n", namespace, "delete", "pods,secrets",
		"-l", "io.astrabox.owner="+owner, "--grace-period=0", "--ignore-not-found", "--wait=true").CombinedOutput()
	if err != nil {
		t.Errorf("kubectl delete the pods of %s: %v: %s", owner, err, out)
	}
	left := strings.TrimSpace(string(out))
	if strings.HasPrefix(left, "No resources found") {
		return ""
	}
	return left
}
