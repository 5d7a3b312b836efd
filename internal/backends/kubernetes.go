package backends

import (
	"errors"
	"fmt"
	"time"

	"github.com/astrabox/astrabox/provider/kubernetes"
	"github.com/astrabox/astrabox/sandbox"
)

// KubernetesConfig is the "kubernetes" section of the server config: the
// cluster that the kubernetes backend runs boxes on.
type KubernetesConfig struct {
	// Kubeconfig is the kubeconfig file (default: in-cluster, the
	// server's own service account).
	Kubeconfig string `json:"kubeconfig"`
	// Context is its context (default: the current one).
	Context string `json:"context"`
	// Namespace holds the boxes (default "astrabox-sandboxes").
	Namespace string `json:"namespace"`
	// ExecdImage holds only the static astrabox binary (make
	// image-execd); required when the backend is opened.
	ExecdImage string `json:"execdImage"`
	// PullPolicy is IfNotPresent (default) or Never.
	PullPolicy string `json:"pullPolicy"`
	// Owner labels what the backend creates; replicas serving one
	// namespace set the same (default "astrabox").
	Owner string `json:"owner"`
	// Direct reaches execd at Pod IPs (a server inside the cluster)
	// instead of through the API server's port-forward.
	Direct bool `json:"direct"`
	// EgressFiltered states that the cluster enforces NetworkPolicy, so
	// network unrestricted can be offered.
	EgressFiltered bool `json:"egressFiltered"`
	// SeccompProfile is a Localhost profile on the nodes (default: the
	// runtime's, RuntimeDefault).
	SeccompProfile string `json:"seccompProfile"`
	// RuntimeClass is the default RuntimeClass of boxes.
	RuntimeClass string `json:"runtimeClass"`
	// RuntimeClasses are those profiles may choose ("runtime"), each
	// with its placement.
	RuntimeClasses []KubernetesRuntimeClass `json:"runtimeClasses"`
	// NodeSelector and Tolerations place every other box.
	NodeSelector map[string]string       `json:"nodeSelector"`
	Tolerations  []kubernetes.Toleration `json:"tolerations"`
	// RequestPercent is the share of each limit a Pod requests (default
	// 100).
	RequestPercent int `json:"requestPercent"`
	// StartTimeout is the seconds a box may take to start (default 120).
	StartTimeout int `json:"startTimeout"`
}

// KubernetesRuntimeClass is a RuntimeClass of the "kubernetes" section.
type KubernetesRuntimeClass struct {
	Name         string                  `json:"name"`
	Isolation    string                  `json:"isolation"` // container, sandboxed or vm; default: told by the name
	NodeSelector map[string]string       `json:"nodeSelector"`
	Tolerations  []kubernetes.Toleration `json:"tolerations"`
}

// Validate checks the section's values; its error names the key it
// refuses, under key. An empty ExecdImage passes: it is required only
// when the backend is opened.
func (c KubernetesConfig) Validate(key string) error {
	switch c.PullPolicy {
	case "", "IfNotPresent", "Never":
	default:
		return fmt.Errorf("%s.pullPolicy %q: want IfNotPresent or Never (the backend never forces a pull)", key, c.PullPolicy)
	}
	if c.RequestPercent < 0 || c.RequestPercent > 100 {
		return fmt.Errorf("%s.requestPercent %d: want 1 to 100", key, c.RequestPercent)
	}
	if c.StartTimeout < 0 {
		return fmt.Errorf("%s.startTimeout must not be negative", key)
	}
	for i, r := range c.RuntimeClasses {
		if r.Name == "" {
			return fmt.Errorf("%s.runtimeClasses[%d].name is required", key, i)
		}
		switch sandbox.Isolation(r.Isolation) {
		case "", sandbox.IsolationContainer, sandbox.IsolationSandboxed, sandbox.IsolationVM:
		default:
			return fmt.Errorf("%s.runtimeClasses[%d].isolation %q: want container, sandboxed or vm", key, i, r.Isolation)
		}
	}
	return nil
}

// open makes the kubernetes backend; it refuses a section without
// execdImage before any cluster is contacted.
func (c KubernetesConfig) open(env Env) (sandbox.Provider, error) {
	if err := c.Validate("kubernetes"); err != nil {
		return nil, err
	}
	if c.ExecdImage == "" {
		return nil, errors.New("the kubernetes backend needs kubernetes.execdImage (an image holding the astrabox binary: make image-execd)")
	}
	cfg := kubernetes.Config{Kubeconfig: c.Kubeconfig, Context: c.Context, Namespace: c.Namespace, ExecdImage: c.ExecdImage,
		PullPolicy: kubernetes.PullPolicy(c.PullPolicy), Owner: c.Owner, Direct: c.Direct, EgressFiltered: c.EgressFiltered,
		SeccompProfile: c.SeccompProfile, RuntimeClass: c.RuntimeClass, NodeSelector: c.NodeSelector, Tolerations: c.Tolerations,
		RequestPercent: c.RequestPercent, StartTimeout: time.Duration(c.StartTimeout) * time.Second, Logger: env.logger("kubernetes")}
	for _, r := range c.RuntimeClasses {
		cfg.RuntimeClasses = append(cfg.RuntimeClasses, kubernetes.RuntimeClass{Name: r.Name, Isolation: sandbox.Isolation(r.Isolation),
			NodeSelector: r.NodeSelector, Tolerations: r.Tolerations})
	}
	p, err := kubernetes.New(cfg)
	if err != nil {
		return nil, err
	}
	return p, nil
}
