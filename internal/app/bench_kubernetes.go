package app

import (
	"flag"
	"fmt"
	"log/slog"

	"github.com/astrabox/astrabox/internal/bench"
	"github.com/astrabox/astrabox/provider/kubernetes"
	"github.com/astrabox/astrabox/sandbox"
)

// kubeBenchFlags are the bench's flags for the kubernetes backend.
type kubeBenchFlags struct {
	kubeconfig, namespace, image, execdImage, seccomp *string
}

func addKubeBenchFlags(fs *flag.FlagSet) kubeBenchFlags {
	return kubeBenchFlags{
		kubeconfig: fs.String("kube-kubeconfig", "", "kubeconfig of the kubernetes backend's cluster (default: in-cluster)"),
		namespace:  fs.String("kube-namespace", "default", "namespace of the kubernetes backend's boxes (it must exist)"),
		image:      fs.String("kube-image", "", "image of the kubernetes backend's boxes, present on the nodes"),
		execdImage: fs.String("kube-execd-image", "", "the execd image (make image-execd) holding this binary, present on the nodes"),
		seccomp:    fs.String("kube-seccomp", "", "Localhost seccomp profile of the boxes (default RuntimeDefault)"),
	}
}

// kubeBenchTarget is the kubernetes backend as a bench target. Its Pods
// request 2% of their limits, so that the concurrent scenario's 50 boxes
// fit on a 2-core node.
func kubeBenchTarget(f kubeBenchFlags, res sandbox.Resources) (bench.Target, func(), error) {
	if *f.image == "" || *f.execdImage == "" {
		return bench.Target{}, func() {}, fmt.Errorf("bench: the kubernetes backend needs --kube-image and --kube-execd-image")
	}
	p, err := kubernetes.New(kubernetes.Config{Kubeconfig: *f.kubeconfig, Namespace: *f.namespace, ExecdImage: *f.execdImage,
		SeccompProfile: *f.seccomp, RequestPercent: 2, Owner: "astrabox-bench", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return bench.Target{}, func() {}, err
	}
	return bench.Target{Name: "kubernetes", Provider: p, Image: *f.image, Resources: res}, func() { _ = p.Close() }, nil
}
