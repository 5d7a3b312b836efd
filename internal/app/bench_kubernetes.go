package app

import (
	"flag"
	"fmt"

	"github.com/astrabox/astrabox/internal/backends"
	"github.com/astrabox/astrabox/internal/bench"
	"github.com/astrabox/astrabox/sandbox"
)

// kubeBenchFlags are the bench's flags for the kubernetes backend.
type kubeBenchFlags struct {
	kubeconfig, namespace, image, execdImage, seccomp *string
	// direct adds the target kubernetes-direct (execd dialled at the Pod
	// IP), both targets then with network unrestricted.
	direct *bool
}

func addKubeBenchFlags(fs *flag.FlagSet) kubeBenchFlags {
	return kubeBenchFlags{
		kubeconfig: fs.String("kube-kubeconfig", "", "kubeconfig of the kubernetes backend's cluster (default: in-cluster)"),
		namespace:  fs.String("kube-namespace", "default", "namespace of the kubernetes backend's boxes (it must exist)"),
		image:      fs.String("kube-image", "", "image of the kubernetes backend's boxes, present on the nodes"),
		execdImage: fs.String("kube-execd-image", "", "the execd image (make image-execd) holding this binary, present on the nodes"),
		seccomp:    fs.String("kube-seccomp", "", "Localhost seccomp profile of the boxes (default RuntimeDefault)"),
		direct: fs.Bool("kube-direct", false, "also measure kubernetes-direct: execd dialled at the Pod IP instead of through "+
			"the API server's port-forward (this host must reach the Pod network); both targets' boxes are then unrestricted, "+
			"which the backend offers only where the cluster enforces NetworkPolicy"),
	}
}

// kubeBenchTargets are the kubernetes backend's bench targets: kubernetes
// (execd through port-forward) and, with --kube-direct, kubernetes-direct.
// Their Pods request 2% of their limits, so that the concurrent
// scenario's 50 boxes fit on a 2-core node; each has its own owner label,
// so neither takes the other's boxes for orphans.
func kubeBenchTargets(f kubeBenchFlags, res sandbox.Resources) ([]bench.Target, func(), error) {
	if *f.image == "" || *f.execdImage == "" {
		return nil, func() {}, fmt.Errorf("bench: the kubernetes backend needs --kube-image and --kube-execd-image")
	}
	var targets []bench.Target
	var closers []func()
	closeAll := func() {
		for _, c := range closers {
			c()
		}
	}
	modes := []bool{false}
	if *f.direct {
		modes = append(modes, true)
	}
	for _, direct := range modes {
		name, owner, network := "kubernetes", "astrabox-bench", sandbox.NetworkMode("")
		if *f.direct {
			// The same box shape on both paths: only the dial differs.
			network = sandbox.NetworkUnrestricted
		}
		if direct {
			name, owner = "kubernetes-direct", "astrabox-bench-direct"
		}
		section := backends.KubernetesConfig{Kubeconfig: *f.kubeconfig, Namespace: *f.namespace, ExecdImage: *f.execdImage,
			SeccompProfile: *f.seccomp, RequestPercent: 2, Owner: owner, Direct: direct, EgressFiltered: *f.direct}
		p, err := backends.Config{Kubernetes: section}.Open("kubernetes", backends.Env{})
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		closers = append(closers, func() { closeBackend(p) })
		targets = append(targets, bench.Target{Name: name, Provider: p, Image: *f.image, Resources: res, Network: network})
	}
	return targets, closeAll, nil
}
